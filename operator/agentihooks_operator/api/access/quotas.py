"""Fair shares of the control API per credential: no one caller takes what every caller needs.

The listener's connection cap (:mod:`..server`) bounds the process, not a caller: one master's
credential holding hundreds of open event streams, or one worker's hundreds of slow uploads, would
take every connection slot, and the API (``/healthz`` included) would stop answering everyone.
So each credential may hold at most ``streams`` open event streams and ``uploads`` uploads in
flight, and every upload spooled at once shares one ``spool_bytes`` budget, of which one credential
may hold at most ``credential_share`` and one swarm at most ``swarm_share`` (a worker's trickling
uploads once held 1,019 MiB of 1 GiB and another swarm's worker got ``507``). Past a bound the
answer comes at once, never a wait: ``429`` (a caller's or its swarm's own share) or ``507`` (the
shared spool), each with ``Retry-After`` and ``Connection: close`` so the refused socket is given
back too.

Credentials are told apart by their sha256 digest (what authentication already computed), never by
the token itself. Counts live in this process: each replica bounds what it serves.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from ..errors import HttpProblem

#: Seconds a refused caller is told to wait before trying again.
RETRY_AFTER = 5


def _refused(status: int, code: str, message: str) -> HttpProblem:
    return HttpProblem(
        status, code, message, headers={"Retry-After": str(RETRY_AFTER), "Connection": "close"}
    )


@dataclass
class Quotas:
    """Per-credential shares of streams and uploads, and the shared upload spool."""

    streams: int = 4
    uploads: int = 4
    spool_bytes: int = 1024**3
    #: Parts of ``spool_bytes`` one credential, and one swarm, may hold at once.
    credential_share: float = 0.5
    swarm_share: float = 0.75
    _held: Counter[tuple[str, str]] = field(default_factory=Counter, init=False, repr=False)
    _spooled: int = field(default=0, init=False, repr=False)
    _spooled_by: Counter[tuple[str, str]] = field(default_factory=Counter, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @contextmanager
    def hold(self, what: str, digest: str) -> Iterator[None]:
        """One of ``digest``'s ``what`` (``streams`` or ``uploads``) for the block; 429 past its share."""
        cap = self.streams if what == "streams" else self.uploads
        with self._lock:
            if self._held[(what, digest)] >= cap:
                noun = "open event streams" if what == "streams" else "uploads in flight"
                raise _refused(429, f"too_many_{what}", f"this credential already has {cap} {noun}")
            self._held[(what, digest)] += 1
        try:
            yield
        finally:
            with self._lock:
                self._held[(what, digest)] -= 1
                if self._held[(what, digest)] <= 0:
                    del self._held[(what, digest)]

    def held(self, what: str, digest: str) -> int:
        with self._lock:
            return self._held[(what, digest)]

    def spool(self, n: int, digest: str = "", swarm: str = "") -> None:
        """Take ``n`` more bytes of the shared spool for ``digest``'s upload in ``swarm``: 429 past the
        credential's or the swarm's share, 507 when the spool is full (nothing taken either way)."""
        with self._lock:
            if self._spooled + n > self.spool_bytes:
                raise _refused(507, "spool_full", "the controller's upload spool is full; try again shortly")
            for who, key, share in (
                ("credential", digest, self.credential_share),
                ("swarm", swarm, self.swarm_share),
            ):
                cap = int(self.spool_bytes * share)
                if key and self._spooled_by[(who, key)] + n > cap:
                    raise _refused(
                        429,
                        "spool_share_full",
                        f"this {who}'s uploads already hold its share of the spool ({cap} bytes)",
                    )
            self._spooled += n
            for who, key in (("credential", digest), ("swarm", swarm)):
                if key:
                    self._spooled_by[(who, key)] += n

    def unspool(self, n: int, digest: str = "", swarm: str = "") -> None:
        with self._lock:
            self._spooled = max(0, self._spooled - n)
            for who, key in (("credential", digest), ("swarm", swarm)):
                if key:
                    left = self._spooled_by[(who, key)] - n
                    if left > 0:
                        self._spooled_by[(who, key)] = left
                    else:
                        self._spooled_by.pop((who, key), None)

    def spooled_by(self, who: str, key: str) -> int:
        with self._lock:
            return self._spooled_by[(who, key)]

    @property
    def spooled(self) -> int:
        with self._lock:
            return self._spooled
