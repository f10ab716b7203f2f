"""Serving the control API on the running event loop (kopf's in the operator, a test's in tests).

:func:`start_control_api` binds and returns a :class:`ControlServer` to stop
later; :func:`run_control_api` is a blocking entry for demos and tools that run
the API without kopf around it.

The listener is guarded against slow and idle clients (:class:`ServerLimits`,
set by the ``AGENTIHOOKS_CONTROL_*`` settings):

- **Header timeout.** A connection's request line and headers must arrive in
  full within ``header_timeout`` seconds of the connection opening, or of the
  first byte of each later request on it; else the connection is answered
  ``408`` and closed. aiohttp has no such timer of its own (only its keep-alive
  timer, which starts at the last answer and is meant for idle connections), so
  :class:`GuardedHandler` adds one.
- **Keep-alive timeout.** An idle connection between requests is closed after
  ``keepalive_timeout`` seconds (aiohttp's own timer).
- **Connection cap with backpressure.** At most ``max_connections`` connections
  are open at once. Past the cap the listener stops accepting: new clients wait
  in the kernel's listen queue (``backlog``) until a connection closes, and past
  that the kernel refuses them. The process never holds more sockets than the
  cap, whatever clients do.
- **Per source.** One peer address holds at most ``max_connections_per_source`` of those
  connections; a further one is answered ``429 too_many_connections`` at once
  and closed (:mod:`.sources`), so one Pod or one host cannot take the slots
  that others need, even before the cap is reached.
- **Request line and header sizes** are aiohttp's limits, made settings.
  Malformed or oversized request heads are answered 400 with the API's JSON
  error, logged once at INFO, without a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import select
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from .app import API_HEADERS, create_app
from .limits import ServerLimits
from .sources import Refusals, Sources, peer
from .state import ApiState

log = logging.getLogger("agentihooks.api")


def _timeout_answer() -> bytes:
    body = json.dumps(
        {"error": "header_timeout", "message": "the request line and headers did not arrive in time"}
    ).encode()
    head = [
        "HTTP/1.1 408 Request Timeout",
        "Content-Type: application/json; charset=utf-8",
        *(f"{k}: {v}" for k, v in API_HEADERS.items()),
        "Connection: close",
        f"Content-Length: {len(body)}",
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


TIMEOUT_ANSWER = _timeout_answer()


class GuardedHandler(RequestHandler):
    """aiohttp's connection protocol with a header-read timer and a slot it gives back when closed.

    The timer is armed when the connection opens and when the first byte of a request arrives on an
    idle connection; it is disarmed as soon as aiohttp has parsed a whole request head. When it
    fires with no new request parsed, the client gets ``408`` and the connection is closed.
    """

    __slots__ = ("_head_since", "_header_timeout", "_header_timer", "_on_closed")

    def __init__(
        self,
        manager: web.Server,
        *,
        loop: asyncio.AbstractEventLoop,
        header_timeout: float,
        on_closed: Callable[[], None],
        **kwargs: Any,
    ) -> None:
        super().__init__(manager, loop=loop, **kwargs)
        self._header_timeout = header_timeout
        self._header_timer: asyncio.TimerHandle | None = None
        self._head_since = 0.0
        self._on_closed: Callable[[], None] | None = on_closed

    def _arm(self) -> None:
        self._disarm()
        self._head_since = self._loop.time()
        self._header_timer = self._loop.call_later(
            self._header_timeout, self._header_expired, self._request_count
        )

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_expired(self, parsed: int) -> None:
        self._header_timer = None
        if self._request_count != parsed or self._request_in_progress or self.transport is None:
            return
        log.info("control API: closed a connection whose request head did not arrive in time")
        self.transport.write(TIMEOUT_ANSWER)
        self.force_close()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        parsed = self._request_count
        if data and self._header_timer is None and not self._request_in_progress and not self._messages:
            self._arm()
        super().data_received(data)
        if self._request_count != parsed:
            self._disarm()

    @property
    def idle(self) -> bool:
        """Kept alive after an answer and waiting, with no part of a next request received."""
        return (
            self._request_count > 0
            and self._header_timer is None
            and not self._request_in_progress
            and not self._messages
            and self.transport is not None
        )

    def head_age(self) -> float | None:
        """Seconds this connection has been sending a request head it has not finished (``None``: it
        is not): no request is parsed yet, so nothing of it was authenticated either."""
        if self._header_timer is None or self._request_in_progress or self.transport is None:
            return None
        return self._loop.time() - self._head_since

    def connection_lost(self, exc: BaseException | None) -> None:
        self._disarm()
        try:
            super().connection_lost(exc)
        finally:
            closed, self._on_closed = self._on_closed, None
            if closed is not None:
                closed()

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """A request aiohttp could not parse (or, never expected, a handler that raised past the
        API's middleware): the API's JSON error, one log line without a traceback or the input."""
        if request.writer.output_size > 0:
            raise ConnectionError("an answer was already started; the connection is dropped")
        what = type(exc).__name__ if exc is not None else str(status)
        if status >= 500:
            log.error("control API: a request failed outside the route handlers (%s)", what)
            body = {"error": "internal", "message": "internal error"}
        else:
            log.info("control API: refused a malformed request head (%s)", what)
            body = {
                "error": "malformed_request",
                "message": "the request line or a header is malformed or too long",
            }
        resp = web.json_response(body, status=status, headers=API_HEADERS)
        resp.force_close()
        return resp

    def log_exception(self, *args: Any, **kw: Any) -> None:
        exc = kw.get("exc_info")
        what = type(exc).__name__ if isinstance(exc, BaseException) else "error"
        log.warning("control API: a connection failed (%s)", what)


class CappedSite(web.BaseSite):
    """A TCP listener that holds at most ``limits.max_connections`` connections at once.

    It accepts in its own loop: one slot of a semaphore per open connection, given back when the
    connection closes. With every slot taken it stops accepting, so clients queue in the kernel; if
    one is queued while some connection is merely kept alive (idle between requests), that idle
    connection is closed to make room, as HTTP allows a server to at any time.
    """

    __slots__ = (
        "_accepting",
        "_handler_args",
        "_handlers",
        "_host",
        "_limits",
        "_open",
        "_port",
        "_refusals",
        "_slots",
        "_sock",
        "_sources",
        "stalled_closed",
    )

    def __init__(
        self, runner: web.AppRunner, host: str, port: int, limits: ServerLimits, handler_args: dict[str, Any]
    ) -> None:
        super().__init__(runner, backlog=limits.backlog)
        self._host = host
        self._port = port
        self._limits = limits
        self._handler_args = handler_args
        self._sock: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._slots = asyncio.Semaphore(limits.max_connections)
        self._open = 0
        self._handlers: set[GuardedHandler] = set()
        #: Connections closed at the cap because their request head was still arriving.
        self.stalled_closed = 0
        #: Connections open per peer address, and those refused past ``limits.max_connections_per_source``.
        self._sources = Sources(limits.max_connections_per_source, limits.per_source_exempt)
        self._refusals = Refusals()

    @property
    def name(self) -> str:
        return f"http://{self._host}:{self.port}"

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1]) if self._sock is not None else self._port

    @property
    def open_connections(self) -> int:
        """Connections accepted and not closed yet (never more than the cap)."""
        return self._open

    async def start(self) -> None:
        await super().start()
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        sock = socket.create_server((self._host, self._port), family=family, backlog=self._limits.backlog)
        sock.setblocking(False)
        self._sock = sock
        self._accepting = asyncio.get_running_loop().create_task(self._accept_forever())

    async def stop(self) -> None:
        if self._accepting is not None:
            self._accepting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._accepting
            self._accepting = None
        await self._refusals.stop()
        if self._sock is not None:
            self._sock.close()
        await super().stop()

    @property
    def source_refused(self) -> int:
        """Connections refused because their peer address held its share already."""
        return self._sources.refused

    def _release(self, source: str) -> Callable[[], None]:
        """Give the connection's slot (and its source's) back, once, when it closes."""
        done = False

        def release() -> None:
            nonlocal done
            if not done:
                done = True
                self._open -= 1
                self._sources.leave(source)
                self._slots.release()

        return release

    def _protocol(self, server: web.Server, release: Callable[[], None]) -> Callable[[], GuardedHandler]:
        loop = asyncio.get_running_loop()

        def make() -> GuardedHandler:
            handler: GuardedHandler

            def closed() -> None:
                self._handlers.discard(handler)
                release()

            handler = GuardedHandler(
                server,
                loop=loop,
                header_timeout=self._limits.header_timeout,
                on_closed=closed,
                **self._handler_args,
            )
            self._handlers.add(handler)
            return handler

        return make

    def _client_waiting(self) -> bool:
        assert self._sock is not None
        readable, _, _ = select.select([self._sock], [], [], 0)
        return bool(readable)

    async def _slot(self) -> None:
        """A free slot. While none is and a client is queued, a connection gives its slot up to it: an
        idle kept-alive one first, else the one that has been sending an unfinished request head the
        longest, past ``head_grace`` (a trickle of header bytes, never authenticated). So a flood of
        slow, tokenless connections cannot keep a master or a worker out: each newcomer takes the
        oldest trickler's slot, and a real client's head arrives in milliseconds."""
        while True:
            made_room = False
            if self._slots.locked() and self._client_waiting():
                made_room = self._make_room()
            try:
                # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancel that arrives as
                # the slot is granted, and the stopping site would then wait in accept forever
                async with asyncio.timeout(0.02 if made_room else 0.2):
                    await self._slots.acquire()
                return
            except TimeoutError:
                continue

    def _make_room(self) -> bool:
        idle = next((h for h in self._handlers if h.idle), None)
        if idle is not None:
            log.debug("control API: closed an idle connection to make room")
            idle.force_close()
            return True
        ages = [(age, h) for h in self._handlers if (age := h.head_age()) is not None]
        if ages:
            age, oldest = max(ages, key=lambda pair: pair[0])
            if age >= self._limits.head_grace:
                self.stalled_closed += 1
                if oldest.transport is not None:
                    oldest.transport.write(TIMEOUT_ANSWER)
                oldest.force_close()
                return True
        return False

    async def _accept_forever(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._sock is not None
        server = self._runner.server
        assert server is not None
        while True:
            await self._slot()
            try:
                conn, _ = await loop.sock_accept(self._sock)
            except asyncio.CancelledError:
                self._slots.release()
                raise
            except OSError as e:  # out of file descriptors, or the client went away before accept
                self._slots.release()
                log.warning("control API: accepting a connection failed (%s)", type(e).__name__)
                await asyncio.sleep(0.1)
                continue
            source = peer(conn)
            if not self._sources.admit(source):
                self._refusals.refuse(conn)
                self._slots.release()
                continue
            self._open += 1
            release = self._release(source)
            try:
                await loop.connect_accepted_socket(self._protocol(server, release), sock=conn)
            except (OSError, RuntimeError) as e:
                conn.close()
                release()
                log.warning("control API: a new connection failed (%s)", type(e).__name__)


@dataclass
class ControlServer:
    runner: web.AppRunner
    host: str
    port: int
    site: CappedSite | None = None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host  # noqa: S104
        return f"http://{host}:{self.port}"

    @property
    def open_connections(self) -> int:
        return self.site.open_connections if self.site is not None else 0

    async def stop(self) -> None:
        await self.runner.cleanup()


def default_limits() -> ServerLimits:
    """The limits the ``AGENTIHOOKS_CONTROL_*`` settings give (documented defaults otherwise)."""
    from .config import ApiConfig

    return ApiConfig().limits()


async def start_control_api(
    state: ApiState, host: str = "127.0.0.1", port: int = 8080, limits: ServerLimits | None = None
) -> ControlServer:
    """Serve the API on ``host:port`` (port 0 picks a free one) and return the running server.

    ``limits`` defaults to the ``AGENTIHOOKS_CONTROL_*`` settings of the environment.
    """
    limits = limits or default_limits()
    return await serve(create_app(state, limits.body_timeout), host, port, limits, shutdown_timeout=2.0)


async def serve(
    app: web.Application, host: str, port: int, limits: ServerLimits, *, shutdown_timeout: float
) -> ControlServer:
    """Serve ``app`` on ``host:port`` behind a :class:`CappedSite` with ``limits`` (the control API's
    listener, and the probes' own in :mod:`.health`)."""
    handler_args: dict[str, Any] = {
        "access_log": None,
        "keepalive_timeout": limits.keepalive_timeout,
        "max_line_size": limits.max_line_size,
        "max_field_size": limits.max_field_size,
        "max_headers": limits.max_headers,
    }
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=shutdown_timeout, **handler_args)
    await runner.setup()
    site = CappedSite(runner, host, port, limits, handler_args)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    return ControlServer(runner, host, site.port, site)


def run_control_api(state: ApiState, host: str = "127.0.0.1", port: int = 8080) -> None:
    """Serve until interrupted (blocking)."""

    async def forever() -> None:
        server = await start_control_api(state, host, port)
        try:
            await asyncio.Event().wait()
        finally:
            await server.stop()

    asyncio.run(forever())
