"""What this attempt already did, so a boot that crashed and runs again does nothing twice.

``run/restore.json`` is written (atomically) once the restore succeeded, and
updated as the outcome is reported, the ``restore_verified`` line is logged
and the first capture is committed. A second boot of the same attempt reads
it and skips those steps. ``run/source.started`` marks that this attempt began
writing the worktree: a boot that finds it without ``restore.json`` owns the
worktree's half-applied state and resets it before applying the source again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from agentihooks_checkpoint.directive import RestoreOutcome
from agentihooks_checkpoint.record import encode_record, parse_record

from .restorer import Restored


class AttemptState:
    """The ``run/`` markers of one attempt."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / "restore.json"
        self.source_marker = run_dir / "source.started"
        self.data: dict[str, Any] = {}

    def load(self) -> Restored | None:
        """The restore an earlier boot of this attempt completed, if any."""
        try:
            self.data = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return None
        record = parse_record(self.data["record"].encode()) if self.data.get("record") else None
        return Restored(
            outcome=RestoreOutcome.model_validate(self.data["outcome"]),
            record=record,
            argv=list(self.data["argv"]),
            stdin=Path(self.data["stdin"]) if self.data.get("stdin") else None,
            transcript=Path(self.data["transcript"]) if self.data.get("transcript") else None,
            harness_version=self.data.get("harness_version"),
        )

    def save(self, restored: Restored) -> None:
        self.data = {
            "outcome": restored.outcome.model_dump(mode="json"),
            "record": encode_record(restored.record).decode() if restored.record else None,
            "argv": restored.argv,
            "stdin": str(restored.stdin) if restored.stdin else None,
            "transcript": str(restored.transcript) if restored.transcript else None,
            "harness_version": restored.harness_version,
        }
        self._write()

    def done(self, step: str) -> bool:
        return bool(self.data.get(step))

    def mark(self, step: str, value: object = True) -> None:
        self.data[step] = value
        self._write()

    def _write(self) -> None:
        tmp = self.path.with_name(".restore.json.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(self.data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
