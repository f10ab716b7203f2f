"""The restore directive a replacement launches with, and the outcome it reports.

The controller builds a directive when it accepts a decision; the worker reads
it from its launch record. Both ends validate it with the same rules, so a
directive whose fields disagree is refused as malformed wherever it appears.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .errors import MalformedDirective

IDENTIFIER = r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$"


class Continuity(StrEnum):
    """How a seat continues after its attempt was fenced."""

    NATIVE = "native"
    RECONSTRUCTED = "reconstructed"
    FRESH = "fresh"


class RestoreDirective(BaseModel):
    """The four fields a replacement restores by.

    * ``fresh``: no checkpoint, no session, no watermark.
    * ``reconstructed``: a checkpoint and its watermark, no session.
    * ``native``: a checkpoint, its watermark and the session id to reopen.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    checkpoint_id: str | None = Field(default=None, pattern=IDENTIFIER)
    recovery: Continuity
    session_id: str | None = Field(default=None, pattern=IDENTIFIER)
    watermark: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _fields_agree(self) -> RestoreDirective:
        if self.recovery is Continuity.FRESH:
            if self.checkpoint_id is not None or self.session_id is not None or self.watermark is not None:
                raise ValueError("a fresh directive names no checkpoint, session or watermark")
        else:
            if self.checkpoint_id is None:
                raise ValueError(f"a {self.recovery.value} directive must name a checkpoint")
            if self.watermark is None:
                raise ValueError(f"a {self.recovery.value} directive must carry the watermark")
            if self.recovery is Continuity.NATIVE and self.session_id is None:
                raise ValueError("a native directive must name the session id")
            if self.recovery is Continuity.RECONSTRUCTED and self.session_id is not None:
                raise ValueError("only a native directive names a session id")
        return self


def parse_directive(data: Any) -> RestoreDirective:
    """Validate ``data`` as a directive, raising :class:`MalformedDirective` with a clear message."""
    try:
        return RestoreDirective.model_validate(data)
    except ValidationError as e:
        details = "; ".join(
            f"{'.'.join(map(str, err['loc'])) or 'directive'}: {err['msg']}" for err in e.errors()
        )
        raise MalformedDirective(f"malformed restore directive: {details}") from e


class RestoreOutcome(BaseModel):
    """What a replacement reports after its restore: the continuity it really got."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    execution_id: str = Field(pattern=IDENTIFIER)
    recovery: Continuity
    checkpoint_id: str | None = Field(default=None, pattern=IDENTIFIER)
    session_id: str | None = Field(default=None, pattern=IDENTIFIER)
    watermark: int | None = Field(default=None, ge=0)

    def matches(self, directive: RestoreDirective) -> bool:
        """True when this outcome delivers exactly what ``directive`` asked for.

        All four fields: continuity, checkpoint, session and the watermark the conversation was
        restored up to (a restore from another point of the transcript is not the directive's).
        """
        return (
            self.recovery == directive.recovery
            and self.checkpoint_id == directive.checkpoint_id
            and self.session_id == directive.session_id
            and self.watermark == directive.watermark
        )
