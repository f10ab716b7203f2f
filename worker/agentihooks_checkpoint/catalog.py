"""What the controller needs to know about checkpoints without hashing them.

The controller picks "the newest complete checkpoint compatible with the
current worker image" for a fenced attempt. Stores implement
:class:`CheckpointCatalog`; the recovery core depends only on this module.
"Complete" here means committed with every listed object present at its
recorded size: cheap presence checks. Full hashing is ``Validator.verify``,
which the worker runs before it applies anything.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from .scope import StoreScope


class CheckpointSummary(BaseModel):
    """One listed checkpoint, enough to choose and to build a directive."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    checkpoint_id: str
    checkpoint_sequence: int
    execution_id: str
    task_id: str
    task_generation: int
    execution_generation: int
    compatibility_key: str | None
    harness: str | None
    #: True when the record supports native resume (qualified capability and native files listed).
    native: bool
    native_session_id: str | None
    #: ``transcript_durable_cursor.sequence``: the last archived transcript record.
    watermark: int | None
    #: Committed and every listed object present with its recorded size.
    complete: bool
    created_at: str
    #: The record's top-level fields this package does not know (a newer minor's), as written:
    #: relayed so a master's tools see a newer writer's record whole.
    unknown_fields: dict[str, Any] = Field(default_factory=dict)
    #: The record's ``schema_version`` (any 2.x).
    schema_version: str | None = None


class CheckpointCatalog(Protocol):
    """Lists checkpoints of a scope, newest (highest sequence) first."""

    def list_checkpoints(
        self, scope: StoreScope, *, execution_id: str | None = None
    ) -> list[CheckpointSummary]: ...


class EmptyCatalog:
    """The catalog used when no checkpoint store is configured: it lists nothing."""

    def list_checkpoints(
        self, scope: StoreScope, *, execution_id: str | None = None
    ) -> list[CheckpointSummary]:
        return []


def newest_compatible(
    summaries: Iterable[CheckpointSummary], compatibility_key: str
) -> CheckpointSummary | None:
    """The newest complete checkpoint captured under ``compatibility_key``, or ``None``."""
    usable = [s for s in summaries if s.complete and s.compatibility_key == compatibility_key]
    if not usable:
        return None
    return max(usable, key=lambda s: (s.checkpoint_sequence, s.created_at))
