"""When the next capture is due: the agent's own events, its session files changing, or the timer.

A checkpoint is only as good as its age when the Pod dies at once (a node
crash, a forced delete, a lease that ran out): everything after it is lost. So
in ``continuous`` mode a worker captures when the agent did something:

* **the harness said so**: the worker renders hooks into the harness's settings
  (Claude Code's ``Stop`` and ``PostToolUse``, :mod:`.hooks`) that append one
  byte to a signal file; any growth of that file is an event;
* **a session file changed**: a cheap signature of the session's files (sizes
  and times, from :class:`.live_capture.LiveCapture`), read every floor interval,
  catches what no hook announced (a harness without hooks, such as Codex in
  ``exec`` mode, appends to its rollout at each turn);
* **the timer**: the periodic capture every ``interval`` seconds stays, as the
  fallback.

Events are **coalesced**: at most one capture per ``floor`` seconds, however
many events came in (a hook firing thousands of times a second is one capture a
floor interval). The floor also grows with what a capture costs: after a
capture that took ``d`` seconds the next event capture waits at least
``COST_RATIO * d`` (a capture is still a whole checkpoint, so a large session
captures less often instead of spending more than about 1/COST_RATIO of the
worker's time on captures). An event that arrives while a capture runs is kept for the next
one, so nothing the agent did after a capture's start is left out for long.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

Due = Literal["event", "periodic"]
#: The signal file is emptied once it holds this many bytes (each event appends one).
SIGNAL_TRUNCATE_AT = 4096
#: After a capture of ``d`` seconds, the next event capture waits at least this many times ``d``.
COST_RATIO = 20.0


class CaptureTriggers:
    """Decides, at each look of the supervisor's loop, whether a capture is due and why."""

    def __init__(
        self,
        *,
        floor: float,
        interval: float,
        continuous: bool = True,
        signal_file: Path | None = None,
        watch: Callable[[], object] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.floor = floor
        self.interval = interval
        self.continuous = continuous
        self.signal_file = signal_file
        self.watch = watch
        self.clock = clock
        now = clock()
        self._last_capture = now
        self._next_watch = now + floor
        self._pending = False
        self._cost = 0.0  # seconds the last capture took
        self._signal_seen: tuple[int, int] | None = self._signal_state()
        #: What the last look at the session saw; at the start, no session (``None``): a session the
        #: first look finds was never captured by this worker, so it is an event too.
        self._watched: object = None
        self._lock = threading.Lock()
        #: Events seen (hooks, file changes, pokes) and captures asked for: what tests and benches count.
        self.events = 0
        self.asked = 0

    def poke(self) -> None:
        """An event from anywhere (thread-safe)."""
        with self._lock:
            self._pending = True
            self.events += 1

    def due(self) -> Due | None:
        """What capture is due now (``None``: none). The caller captures, then calls :meth:`taken`."""
        now = self.clock()
        if self.continuous:
            self._look(now)
        with self._lock:
            if self._pending and now - self._last_capture >= self.effective_floor:
                self.asked += 1
                return "event"
        if self.interval > 0 and now - self._last_capture >= self.interval:
            self.asked += 1
            return "periodic"
        return None

    @property
    def effective_floor(self) -> float:
        """The floor, raised by what the last capture cost."""
        return max(self.floor, COST_RATIO * self._cost)

    def taken(self, cost: float = 0.0) -> None:
        """A capture ran (committed, or skipped as unchanged) and took ``cost`` seconds: the floor and
        the timer start again. What arrives from now on is the next capture's."""
        with self._lock:
            self._pending = False
            self._last_capture = self.clock()
            self._cost = max(0.0, cost)

    # -- the event sources ------------------------------------------------------------------------
    def _look(self, now: float) -> None:
        state = self._signal_state()
        if state is not None and state != self._signal_seen:
            self._signal_seen = state
            self.poke()
            if state[0] >= SIGNAL_TRUNCATE_AT and self.signal_file is not None:
                with contextlib.suppress(OSError):
                    os.truncate(self.signal_file, 0)
                self._signal_seen = self._signal_state()
        if self.watch is not None and now >= self._next_watch:
            self._next_watch = now + self.floor
            try:
                seen = self.watch()
            except OSError:
                return  # a file replaced under us: the next look sees it
            if seen != self._watched:
                # Also at the first look: a harness may write its whole first turn before it (a fresh
                # attempt has no checkpoint yet); a restored session the initial capture just took is
                # skipped as unchanged by the capture itself.
                self.poke()
                self._watched = seen

    def _signal_state(self) -> tuple[int, int] | None:
        if self.signal_file is None:
            return None
        try:
            st = self.signal_file.stat()
        except OSError:
            return None
        return (st.st_size, st.st_mtime_ns)
