"""Run the harness, pass on stop signals, capture while it runs and once more when it stops.

The supervisor is the worker's last step. It starts the harness in its own
process group, forwards SIGTERM and SIGINT to it (escalating to SIGKILL after
the kill budget), calls the capture hook when its triggers say one is due (the
agent's own events, coalesced, and the periodic fallback: :mod:`.triggers`; or
every ``interval`` seconds without triggers) and once after the harness exits,
reports the native session id and archive watermark as they change (at most one
report per ``progress_floor`` seconds; a report held back is sent once the floor
has passed, and the final one at once), and exits with the harness's own exit
code. A harness that ended cleanly but whose final checkpoint could not be
committed exits 75.

With a worker lease (:mod:`.lease`) the supervisor also stops the harness when
the lease says so: :meth:`Supervisor.halt` sends SIGTERM to its process group
and SIGKILL after the stop budget, from the caller's thread and a timer of its
own (never waiting for the capture or report the main loop may be in). A halted
harness gets no final capture (a fenced attempt's credential is revoked; a cut-off
one must not commit after its lease), and the worker exits 77 (fenced) or 76
(lease expired). A capture or report answered ``fenced`` halts it the same way.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Literal, Protocol

from .errors import EXIT_FAILURE, EXIT_FENCED, EXIT_INCOMPLETE_CHECKPOINT, EXIT_LEASE_EXPIRED, EXIT_OK
from .lease import StopReason, is_fenced
from .triggers import CaptureTriggers

log = logging.getLogger(__name__)

CaptureWhen = Literal["initial", "event", "periodic", "final"]


@dataclass(frozen=True)
class CaptureResult:
    """What a committed capture says about the conversation."""

    checkpoint_id: str
    session_id: str | None
    watermark: int | None


class CaptureHook(Protocol):
    """Takes one checkpoint; raises on failure."""

    def __call__(self, when: CaptureWhen) -> CaptureResult | None: ...


#: ``(session_id, watermark, final)``; ``final`` for the capture taken after the harness exited (nothing it
#: wrote lies past that watermark).
ProgressCallback = Callable[[str | None, int | None, bool], None]


class LeaseLike(Protocol):
    """What the supervisor needs of a worker lease (:class:`.lease.WorkerLease`)."""

    def start(self, on_stop: Callable[[StopReason], None]) -> None: ...

    def close(self) -> None: ...


HALT_EXIT = {"fenced": EXIT_FENCED, "lease_expired": EXIT_LEASE_EXPIRED}


class Supervisor:
    """Runs one harness process to completion."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        stdin_file: Path | None = None,
        capture: CaptureHook | None = None,
        interval: float = 0,
        on_progress: ProgressCallback | None = None,
        kill_seconds: float = 10,
        poll_seconds: float = 0.2,
        lease: LeaseLike | None = None,
        triggers: CaptureTriggers | None = None,
        progress_floor: float = 0.0,
    ) -> None:
        self.argv = list(argv)
        self.env = dict(env)
        self.cwd = cwd
        self.stdin_file = stdin_file
        self.capture = capture
        self.interval = interval
        if triggers is None and interval > 0:
            triggers = CaptureTriggers(floor=interval, interval=interval, continuous=False)
        self.triggers = triggers
        self.progress_floor = progress_floor
        self._reported_at: float | None = None
        self._held: tuple[str | None, int | None] | None = None  # a report the floor held back
        self.on_progress = on_progress
        self.kill_seconds = kill_seconds
        self.poll_seconds = poll_seconds
        self.stop_signal: int | None = None
        self.last_reported: tuple[str | None, int | None, bool] = (None, None, False)
        self.captures: list[CaptureResult] = []
        self.lease = lease
        #: Why the harness was stopped for the lease (``fenced``, ``lease_expired``), once it was.
        self.halted: StopReason | None = None
        self._halt_lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._stop_at: float | None = None

    def run(self) -> int:
        """Start the harness and return the exit code the worker should exit with."""
        stdin = self.stdin_file.open("rb") if self.stdin_file else subprocess.DEVNULL
        try:
            self._proc = subprocess.Popen(
                self.argv, env=self.env, cwd=self.cwd, stdin=stdin, start_new_session=True
            )
        except OSError as e:
            log.error("harness could not start: %s", e.strerror or type(e).__name__)
            return EXIT_FAILURE
        finally:
            if self.stdin_file and not isinstance(stdin, int):
                stdin.close()
        previous = {s: signal.signal(s, self._forward) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            if self.lease is not None:
                self.lease.start(self.halt)
            code = self._wait()
        finally:
            if self.lease is not None:
                self.lease.close()
            for s, handler in previous.items():
                signal.signal(s, handler)
        if self.halted is not None:
            self._kill_group()  # whatever of the harness's group outlived it
            return HALT_EXIT[self.halted]
        final_ok = self._capture("final")
        if code == EXIT_OK and not final_ok:
            return EXIT_INCOMPLETE_CHECKPOINT
        return code

    def halt(self, reason: StopReason) -> None:
        """Stop the harness now for the lease's ``reason``: SIGTERM to its group, SIGKILL after the stop
        budget (on a timer thread, so nothing the main loop is doing delays it). Safe from any thread."""
        with self._halt_lock:
            if self.halted is not None:
                return
            self.halted = reason
        log.warning(
            "stopping the harness: %s", "the attempt was fenced" if reason == "fenced" else "lease expired"
        )
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        self._signal_group(signal.SIGTERM)
        threading.Thread(target=self._kill_after, args=(proc,), name="harness-kill", daemon=True).start()

    def _kill_after(self, proc: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + self.kill_seconds
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
        if proc.poll() is None:
            log.warning("harness outlived its kill budget; killing it")
        self._kill_group()

    def _signal_group(self, signum: int) -> None:
        if self._proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, signum)

    def _kill_group(self) -> None:
        self._signal_group(signal.SIGKILL)

    def _forward(self, signum: int, frame: FrameType | None) -> None:
        del frame
        self.stop_signal = signum
        if self._stop_at is None:
            self._stop_at = time.monotonic() + self.kill_seconds
        if self._proc is not None and self._proc.poll() is None:
            log.info("forwarding %s to the harness", signal.Signals(signum).name)
            self._proc.send_signal(signum)

    def _wait(self) -> int:
        assert self._proc is not None
        while True:
            try:
                rc = self._proc.wait(timeout=self.poll_seconds)
                break
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if self._stop_at is not None and now >= self._stop_at:
                log.warning("harness outlived its kill budget; killing it")
                os.killpg(self._proc.pid, signal.SIGKILL)
                self._stop_at = float("inf")
            if self.triggers is not None and self._stop_at is None and not self.halted:
                due = self.triggers.due()
                if due is not None:
                    started = time.monotonic()
                    self._capture(due)
                    self.triggers.taken(time.monotonic() - started)
            if self._held is not None and not self.halted:
                self._report(*self._held)
        return rc if rc >= 0 else 128 - rc

    def _capture(self, when: CaptureWhen) -> bool:
        if self.capture is None:
            return True
        if self.halted is not None:
            return False
        try:
            result = self.capture(when)
        except Exception as e:
            if is_fenced(e):
                self.halt("fenced")
            log.error("%s capture failed: %s", when, type(e).__name__)
            return False
        if result is not None:
            self.captures.append(result)
            self._report(result.session_id, result.watermark, final=when == "final")
        return True

    def _report(self, session_id: str | None, watermark: int | None, *, final: bool = False) -> None:
        final = final and watermark is not None
        if (session_id, watermark, final) == self.last_reported or self.on_progress is None:
            self._held = None
            return
        now = time.monotonic()
        if not final and self._reported_at is not None and now - self._reported_at < self.progress_floor:
            self._held = (session_id, watermark)  # sent by the loop once the floor has passed
            return
        self._held = None
        self._reported_at = now
        try:
            self.on_progress(session_id, watermark, final)
        except Exception as e:  # not noted as reported: the next capture reports it again
            if is_fenced(e):
                self.halt("fenced")
            log.warning("%sprogress report failed: %s", "final " if final else "", type(e).__name__)
            return
        self.last_reported = (session_id, watermark, final)
