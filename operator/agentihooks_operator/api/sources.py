"""Connections per peer address: one Pod or one host cannot take the listener's slots from the rest.

The connection cap (:mod:`.server`) bounds the process; the eviction of trickling request heads keeps a
tokenless flood from holding the slots at the cap. Where a client's address can be known (a worker
Pod's IP, a master's host), this bounds what one address holds *before* the cap: past
``max_connections_per_source`` open connections, the next one from that address is answered ``429
too_many_connections`` at once (``Retry-After: 5``, ``Connection: close``) and closed, before a byte
of its request is read. Behind something that hides clients' addresses (an Ingress controller,
``kubectl port-forward``) every client shares one address, hence the settings
(``AGENTIHOOKS_CONTROL_MAX_CONNECTIONS_PER_SOURCE``, 0 turns it off;
``AGENTIHOOKS_CONTROL_PER_SOURCE_EXEMPT``, by default loopback, where port-forwarded clients and the
operator's own Pod arrive).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
from collections import Counter

from .app import API_HEADERS


def _answer() -> bytes:
    body = json.dumps(
        {
            "error": "too_many_connections",
            "message": "this address holds its share of the control API's connections; retry later",
        }
    ).encode()
    head = [
        "HTTP/1.1 429 Too Many Requests",
        "Content-Type: application/json; charset=utf-8",
        *(f"{k}: {v}" for k, v in API_HEADERS.items()),
        "Retry-After: 5",
        "Connection: close",
        f"Content-Length: {len(body)}",
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


REFUSED_ANSWER = _answer()


class Sources:
    """Open connections per peer address, bounded by ``limit`` (0: unbounded) except for addresses in
    ``exempt`` (networks, as CIDR texts) and for a peer whose address the socket does not give."""

    __slots__ = ("_exempt", "_open", "limit", "refused")

    def __init__(self, limit: int, exempt: tuple[str, ...] = ()) -> None:
        self.limit = limit
        self._exempt = tuple(ipaddress.ip_network(n, strict=False) for n in exempt)
        self._open: Counter[str] = Counter()
        #: Connections refused because their address held ``limit`` already.
        self.refused = 0

    def bounded(self, source: str) -> bool:
        """Whether ``source`` is held to the limit."""
        if not self.limit or not source:
            return False
        try:
            address = ipaddress.ip_address(source.split("%", 1)[0])
        except ValueError:
            return False
        return not any(address.version == n.version and address in n for n in self._exempt)

    def admit(self, source: str) -> bool:
        """Count one more connection of ``source``; False (nothing counted) when it holds its share."""
        if self._open[source] >= self.limit and self.bounded(source):
            self.refused += 1
            return False
        self._open[source] += 1
        return True

    def leave(self, source: str) -> None:
        """One connection of ``source`` closed."""
        self._open[source] -= 1
        if self._open[source] <= 0:
            del self._open[source]

    def holding(self, source: str) -> int:
        return self._open[source]


def peer(conn: socket.socket) -> str:
    """The connection's peer address (without its port); ``""`` when the socket cannot say."""
    try:
        name = conn.getpeername()
    except OSError:
        return ""
    return str(name[0]) if isinstance(name, tuple) else str(name)


#: Refused connections answered at once; past this many still closing, a refused one is just closed.
MAX_CLOSING = 32
#: How long a refused connection is read (and discarded) for the client to see the answer.
LINGER = 1.0


class Refusals:
    """Answer refused connections without reading their request: ``429 too_many_connections``, the
    write side shut, then what the client sends is read and discarded until it closes (at most
    :data:`LINGER` s). Closing at once with the client's request unread would make the kernel reset
    the connection, and the client could lose the answer."""

    __slots__ = ("_closing",)

    def __init__(self) -> None:
        self._closing: set[asyncio.Task[None]] = set()

    def refuse(self, conn: socket.socket) -> None:
        if len(self._closing) >= MAX_CLOSING:
            conn.close()
            return
        task = asyncio.get_running_loop().create_task(_answer_and_close(conn))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def stop(self) -> None:
        for task in list(self._closing):
            task.cancel()
        await asyncio.gather(*self._closing, return_exceptions=True)


async def _answer_and_close(conn: socket.socket) -> None:
    loop = asyncio.get_running_loop()
    try:
        conn.setblocking(False)
        async with asyncio.timeout(LINGER):
            await loop.sock_sendall(conn, REFUSED_ANSWER)
            conn.shutdown(socket.SHUT_WR)
            while await loop.sock_recv(conn, 4096):
                pass
    except (OSError, TimeoutError):
        pass
    finally:
        conn.close()
