"""Read the launch record and refuse one whose restore directive cannot be delivered.

The directive is checked with the contract's own ``parse_directive`` before the
rest of the record, so a directive whose fields disagree is refused as
malformed with the same message the controller would give. A directive that
names a checkpoint also needs the fenced attempt it came from and the
registration to verify it against.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentihooks_checkpoint.directive import Continuity, parse_directive
from agentihooks_checkpoint.errors import MalformedDirective
from agentihooks_checkpoint.launch import LaunchRecord
from agentihooks_checkpoint.reasons import Reason
from pydantic import ValidationError

from .errors import LaunchRecordError, Refused

MAX_LAUNCH_RECORD = 1 << 20


def read_launch_record(path: Path) -> LaunchRecord:
    """Load and check ``path``; raise :class:`Refused` naming what is wrong."""
    try:
        with path.open("rb") as f:  # the cap holds while reading: never more than 1 MiB + 1 byte in memory
            raw = f.read(MAX_LAUNCH_RECORD + 1)
    except OSError as e:
        raise LaunchRecordError(f"launch record unreadable: {e.strerror or e}") from e
    if len(raw) > MAX_LAUNCH_RECORD:
        raise LaunchRecordError("launch record is larger than 1 MiB")
    try:
        data = json.loads(raw)
    except ValueError as e:
        raise LaunchRecordError(f"launch record is not JSON: {e}") from e
    return parse_launch_record(data)


def parse_launch_record(data: Any) -> LaunchRecord:
    """Validate an already decoded launch record."""
    if not isinstance(data, dict):
        raise LaunchRecordError("launch record is not a JSON object")
    if data.get("restore") is not None:
        try:
            parse_directive(data["restore"])
        except MalformedDirective as e:
            raise Refused(Reason.MALFORMED_DIRECTIVE.value, str(e)) from e
    try:
        record = LaunchRecord.model_validate(data)
    except ValidationError as e:
        details = "; ".join(
            f"{'.'.join(map(str, err['loc'])) or 'record'}: {err['msg']}" for err in e.errors()
        )
        raise LaunchRecordError(f"invalid launch record: {details}") from e
    directive = record.restore
    if directive is not None and directive.recovery is not Continuity.FRESH:
        if record.restore_from is None:
            raise Refused(
                Reason.MALFORMED_DIRECTIVE.value,
                "malformed restore directive: a checkpoint restore needs restore_from in the launch record",
            )
        if record.registration is None:
            raise Refused(
                Reason.MALFORMED_DIRECTIVE.value,
                "malformed restore directive: a checkpoint restore needs the registration to verify against",
            )
    return record
