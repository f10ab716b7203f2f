"""Client-side limits of the operator's Kubernetes client: kept connections, and an optional rate.

A burst of failures sends many calls at once (each replacement's creates, each
fenced Pod's delete) from the launcher's and the pass's thread pools. Two things
on the client side can slow that burst below what the API server would serve:

* the connection pool: urllib3 keeps ``connections`` open for reuse, and a call
  beyond them opens a new connection (a TCP and TLS handshake) that is thrown
  away after it. The default (64) is above the operator's concurrent calls, so a
  recovery never pays a handshake per call; the ``kubernetes`` package's own
  default is five per core.
* a rate: none by default. The API server's priority and fairness already
  bounds what one client may take (the chart's FlowSchema gives the operator's
  account its own share), and a client-side rate below the server's capacity
  would only delay recoveries. An administrator who wants the operator to take
  no more than a set rate sets ``qps`` (and ``burst``): a token bucket that every
  call, retries included, takes one token from, waiting for it rather than failing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ClientLimits:
    """``qps`` 0: no rate limit. ``burst`` 0 with a rate: twice the rate (at least 1)."""

    qps: float = 0.0
    burst: int = 0
    connections: int = 64

    def __post_init__(self) -> None:
        if self.qps < 0 or self.burst < 0:
            raise ValueError("kube QPS and burst must not be negative")
        if self.connections < 1:
            raise ValueError("kube connections must be at least 1")


class TokenBucket:
    """``rate`` tokens a second, up to ``capacity`` saved; :meth:`take` waits for one (thread-safe)."""

    def __init__(
        self,
        rate: float,
        capacity: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate <= 0 or capacity < 1:
            raise ValueError("a token bucket needs a positive rate and a capacity of at least 1")
        self.rate, self.capacity = rate, capacity
        self._clock, self._sleep = clock, sleep
        self._tokens = float(capacity)
        self._at = clock()
        self._lock = threading.Lock()
        #: Seconds callers waited for a token in all (the benchmark and tests read it).
        self.waited = 0.0

    def take(self) -> float:
        """Take a token, waiting for it if none is saved; the seconds waited."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.capacity, self._tokens + (now - self._at) * self.rate)
            self._at = now
            self._tokens -= 1  # reserved now: later callers queue behind this one
            wait = -self._tokens / self.rate if self._tokens < 0 else 0.0
            self.waited += wait
        if wait > 0:
            self._sleep(wait)
        return wait


def bucket_for(
    limits: ClientLimits | None,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> TokenBucket | None:
    """The bucket ``limits`` asks for (``None``: no rate), on the caller's clock and sleep."""
    if limits is None or limits.qps == 0:
        return None
    return TokenBucket(limits.qps, limits.burst or max(1, int(limits.qps * 2)), clock=clock, sleep=sleep)
