"""What a restored worker tells the world: the controller (via a reporter) and its log.

The boot talks to the controller through an :class:`OutcomeReporter` (the
contract's ``ControlReporter`` over the control API's worker routes for a
``checkpoint_remote`` launch; tests may pass their own). The
``restore_verified`` line carries identifiers and counts only.
"""

from __future__ import annotations

import json
import sys
from typing import Protocol, TextIO, runtime_checkable

from agentihooks_checkpoint.directive import RestoreOutcome

from .logs import decorate


class OutcomeReporter(Protocol):
    """Reports to the controller (the control API's worker routes)."""

    def report_outcome(self, outcome: RestoreOutcome) -> None: ...

    def report_progress(
        self, execution_id: str, session_id: str | None, watermark: int | None, *, final: bool = False
    ) -> None: ...


@runtime_checkable
class RestoreReporter(Protocol):
    """Also tells the controller's metrics how the restore went (best effort; the contract's
    ``ControlReporter`` does). Reporters without it are simply not asked."""

    def report_restore(
        self, result: str, *, reason: str | None = None, restore_seconds: float | None = None
    ) -> bool: ...


def restore_verified_line(outcome: RestoreOutcome) -> str:
    """The one summary line: event, execution id, recovery, checkpoint id, watermark."""
    return json.dumps(
        {
            "event": "restore_verified",
            "execution_id": outcome.execution_id,
            "recovery": outcome.recovery.value,
            "checkpoint_id": outcome.checkpoint_id,
            "watermark": outcome.watermark,
        }
    )


def emit(line: str, stream: TextIO | None = None) -> None:
    """Write one log line and flush it (the Pod log is read line by line); in the JSON log format an
    event line also carries the attempt's identity (:func:`.logs.decorate`)."""
    out = stream or sys.stderr
    out.write(decorate(line) + "\n")
    out.flush()


def event_line(event: str, **fields: object) -> str:
    """Any other structured log line (refusals, failures): identifiers and reasons only."""
    return json.dumps({"event": event, **fields})
