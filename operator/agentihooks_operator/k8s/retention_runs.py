"""Retention runs beside the passes: at most one at a time per swarm, every ``retention.intervalSeconds``.

A run lists and reads every checkpoint record of the swarm's scopes, which can
take a while on a large store; the pass that starts it does not wait for it
(its own thread, off the failover's critical path). Only the lease holder
starts one (:meth:`Recovery.collect_garbage` checks the lease again).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ..recovery import Recovery
from ..swarm import SwarmSpec

log = logging.getLogger("agentihooks.recovery")


class RetentionRuns:
    def __init__(self, recovery: Recovery, clock: Callable[[], float] = time.monotonic) -> None:
        self.recovery = recovery
        self.clock = clock
        self._last: float | None = None
        self._running: threading.Thread | None = None
        #: Runs finished (what tests wait on).
        self.finished = 0

    def maybe_start(self, spec: SwarmSpec) -> bool:
        """Start a run when one is due and none is running; whether one was started."""
        r = spec.retention
        now = self.clock()
        if not r.enabled or (self._running is not None and self._running.is_alive()):
            return False
        if self._last is not None and now - self._last < r.interval_seconds:
            return False
        self._last = now
        self._running = threading.Thread(target=self._run, args=(spec,), name="retention", daemon=True)
        self._running.start()
        return True

    def _run(self, spec: SwarmSpec) -> None:
        try:
            self.recovery.collect_garbage(spec)
        except Exception:  # a bug or an unexpected store answer: logged, and tried at the next interval
            log.exception("retention run failed")
        finally:
            self.finished += 1
