"""The worker's lease on its attempt: why the agent stops when the controller can no longer vouch for it.

A fence revokes an attempt's authority, but only the worker can stop its own
agent. So a worker whose launch record carries ``worker_lease_seconds`` holds a
lease, renewed through the control API (``POST .../lease``) about every quarter
of its duration, and stops its harness in two cases:

* **fenced**: a renewal (or any call to the controller) is answered ``410
  fenced``: the attempt was fenced; the harness is stopped at once;
* **cut off**: no renewal was acknowledged for too long. Each renewal is timed
  from the moment it was *sent* (this process's monotonic clock), which is no
  later than the controller's stamp of it. The harness gets SIGTERM at
  ``sent + lease - stop budget - margin`` and SIGKILL a stop budget later, so it
  is gone by ``sent + lease - margin``: before the controller, which waits until
  its stamp plus the lease plus its own margin, can start a replacement.

The deadline is watched by a thread of its own: nothing the renewal loop or a
capture is blocked on (a connection that hangs, an upload being retried)
delays the stop. The harness starts only after a first acknowledged renewal, so
there is no stretch of its life that no renewal covers.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Literal

log = logging.getLogger(__name__)

StopReason = Literal["fenced", "lease_expired"]
#: Seconds kept between the harness's certain end and the lease's end on this clock.
MARGIN_SECONDS = 1.0
#: A failed renewal is tried again this soon (or at the renewal interval, if that is shorter).
RETRY_SECONDS = 5.0


class LeaseFenced(Exception):
    """The controller answered that this attempt is fenced."""


def is_fenced(error: BaseException | None) -> bool:
    """Whether ``error`` (or anything it was raised from) is the controller's ``fenced`` answer."""
    seen = 0
    while error is not None and seen < 10:
        if isinstance(error, LeaseFenced) or getattr(error, "code", None) == "fenced":
            return True
        error = error.__cause__ or error.__context__
        seen += 1
    return False


class WorkerLease:
    """Renews one attempt's lease and calls ``on_stop`` once, when the agent must stop.

    ``renew`` sends one renewal and returns when it was acknowledged; it raises on anything else (the
    controller's ``fenced`` answer included, recognised by :func:`is_fenced`).
    """

    def __init__(
        self,
        renew: Callable[[], object],
        *,
        duration: float,
        stop_budget: float,
        interval: float | None = None,
        margin: float = MARGIN_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if stop_budget + margin >= duration:
            raise ValueError("the lease must outlast the harness's stop budget and the margin")
        self.renew_call = renew
        self.duration = duration
        self.stop_budget = stop_budget
        self.margin = margin
        self.interval = interval if interval is not None else duration / 4
        self.clock = clock
        self.stopped: StopReason | None = None
        self.renewals = 0
        self._sent: float | None = None  # when the last acknowledged renewal was sent
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._on_stop: Callable[[StopReason], None] | None = None
        self._threads: list[threading.Thread] = []

    # -- the lease's state --------------------------------------------------------------------
    @property
    def stop_at(self) -> float | None:
        """When the harness gets its SIGTERM unless a renewal is acknowledged first (monotonic)."""
        with self._lock:
            if self._sent is None:
                return None
            return self._sent + self.duration - self.stop_budget - self.margin

    def renew(self) -> None:
        """Send one renewal now; extends the lease when acknowledged, stops the agent when fenced."""
        try:
            self.renew_with(self.renew_call)
        except Exception as e:
            if is_fenced(e):
                raise LeaseFenced("the controller answered that this attempt is fenced") from e
            raise

    def renew_with(self, call: Callable[[], object]) -> None:
        """:meth:`renew` through ``call`` (a renewal that carries progress): raises as ``call`` does."""
        sent = self.clock()
        try:
            call()
        except Exception as e:
            if is_fenced(e):
                self._stop("fenced")
            raise
        self._acked(sent)

    def _acked(self, sent: float) -> None:
        with self._lock:
            if self._sent is None or sent > self._sent:
                self._sent = sent
            self.renewals += 1

    def acquire(self, timeout: float = 0.0) -> None:
        """The first renewal, before the harness starts, tried again (each try timed from its own
        send) for up to ``timeout`` seconds while the controller is away (a restart, a rolling
        update); raises when none was acknowledged, at once when the attempt is fenced."""
        give_up = self.clock() + timeout
        while True:
            try:
                self.renew()
                return
            except LeaseFenced:
                raise
            except Exception:
                if self.clock() >= give_up or self._closed.wait(
                    min(RETRY_SECONDS, max(0.0, give_up - self.clock()))
                ):
                    raise

    # -- the threads ---------------------------------------------------------------------------
    def start(self, on_stop: Callable[[StopReason], None]) -> None:
        """Keep renewing, and watch the deadline; ``on_stop`` is called at most once."""
        if self.stop_at is None:
            raise RuntimeError("acquire the lease before starting it")
        self._on_stop = on_stop
        if self.stopped is not None:  # fenced while acquiring: nothing to renew
            on_stop(self.stopped)
            return
        for target, name in ((self._renewing, "lease-renew"), (self._watching, "lease-watch")):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)

    def close(self) -> None:
        """Stop renewing and watching (the harness has ended)."""
        self._closed.set()
        for t in self._threads:
            t.join(timeout=1)

    def _renewing(self) -> None:
        failing = False
        next_at = self.clock() + self.interval
        while not self._closed.wait(max(0.0, next_at - self.clock())):
            if self.stopped is not None:
                return
            try:
                self.renew()
            except LeaseFenced:
                return
            except Exception as e:  # the controller away: keep trying, the watcher stops the agent in time
                if not failing:
                    log.warning(
                        "lease renewal failed (%s); retrying until the lease runs out", type(e).__name__
                    )
                failing = True
                next_at = self.clock() + min(self.interval, RETRY_SECONDS)
                continue
            if failing:
                log.info("lease renewed again")
            failing = False
            next_at = self.clock() + self.interval

    def check(self) -> float:
        """Stop the agent if its deadline has come; else the seconds left until it (the watcher's step)."""
        stop_at = self.stop_at
        if stop_at is None:
            return float("inf")
        left = stop_at - self.clock()
        if left <= 0:
            self._stop("lease_expired")
        return left

    def _watching(self) -> None:
        while (left := self.check()) > 0:
            if self._closed.wait(left) or self.stopped is not None:
                return

    def _stop(self, reason: StopReason) -> None:
        with self._lock:
            if self.stopped is not None:
                return
            self.stopped = reason
        on_stop = self._on_stop
        if on_stop is not None:
            on_stop(reason)
