"""Runs the per-attempt Kubernetes work of a pass on a small, bounded thread pool.

Each failed attempt's remaining steps (retire the fenced Pod, decide, launch
the replacement) are sequential and journaled exactly as before; only
different attempts overlap, so 100 simultaneous failures no longer cost 100
times the round trips of one to the API server.

A crash must look like a crash: when one attempt's steps raise
:class:`~.errors.InjectedFault` or :class:`~.errors.LeaseLost`, every other
attempt stops at its next named write point (as if the process had died
there) and attempts not started yet never start. The first such error is
raised once all threads have stopped; the journal lets the next pass finish.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from ..logs import carry
from .context import Ctx
from .errors import InjectedFault, LeaseLost

#: Attempts advanced at once; bounded so a mass failure does not flood the API server.
WORKERS = 16


class Fanout:
    """One pass's pool: ``ctx`` is the context the tasks must use (its fault hook honours a crash)."""

    def __init__(self, ctx: Ctx) -> None:
        self._outer = ctx
        self._stopped: BaseException | None = None
        self._lock = threading.Lock()
        self.ctx = dataclasses.replace(ctx, faults=self._point)
        # One lock table for the pass and the API threads, even when the original prunes it.
        self.ctx.lock_for = ctx.lock_for  # type: ignore[method-assign]

    def _point(self, point: str) -> None:
        if self._stopped is not None:
            raise InjectedFault(f"stopped at {point}: another attempt of this pass crashed")
        self._outer.faults(point)

    def _stop(self, e: BaseException) -> None:
        with self._lock:
            if self._stopped is None:
                self._stopped = e

    def _guarded(self, task: Callable[[], None]) -> None:
        if self._stopped is not None:
            return
        try:
            task()
        except (InjectedFault, LeaseLost) as e:
            self._stop(e)

    def run(self, tasks: Sequence[Callable[[], None]]) -> None:
        """Run every task (one alone runs inline); re-raise the first crash after all have stopped."""
        if len(tasks) == 1:
            tasks[0]()
            return
        if tasks:
            with ThreadPoolExecutor(
                max_workers=min(WORKERS, len(tasks)), thread_name_prefix=f"recover-{self._outer.swarm}"
            ) as pool:
                for future in [pool.submit(carry(self._guarded, t)) for t in tasks]:
                    future.result()
        if self._stopped is not None:
            raise self._stopped


class InFlight:
    """The attempts some thread of this process is advancing now (a pass or the event-driven path).

    Each path claims its attempts before the first step and releases them after the last; an
    attempt already claimed is left to the thread that holds it (the periodic pass takes up
    whatever is left next time, from the journal).
    """

    def __init__(self) -> None:
        self._held: set[str] = set()
        self._lock = threading.Lock()

    def claim(self, ids: Sequence[str]) -> list[str]:
        """The ids of ``ids`` this call claimed (those no other thread holds), in order."""
        with self._lock:
            got = [i for i in dict.fromkeys(ids) if i not in self._held]
            self._held.update(got)
        return got

    def release(self, ids: Sequence[str]) -> None:
        with self._lock:
            self._held.difference_update(ids)

    def __contains__(self, execution_id: object) -> bool:
        with self._lock:
            return execution_id in self._held
