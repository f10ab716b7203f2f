"""A catalog row for a committed record: cheap presence checks, never hashing objects."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .catalog import CheckpointSummary
from .checks import check_content, check_scope
from .errors import RecordRefused
from .layout import object_key
from .model import CheckpointRecord

if TYPE_CHECKING:
    from .scope import StoreScope
    from .stores.base import CheckpointStore


def summarize(
    store: CheckpointStore, scope: StoreScope, record: CheckpointRecord, *, intact: bool
) -> CheckpointSummary:
    """``complete`` = intact manifest, in scope, committed, consistent, every object at its size."""
    complete = intact
    if complete:
        try:
            check_scope(record, scope)
            items = check_content(record)
        except RecordRefused:
            complete = False
        else:
            for digest, expected in (o for item in items for o in item.objects):
                size = store.size_of(scope, object_key(digest))
                if size is None or (expected is not None and size != expected):
                    complete = False
                    break
    a = record.authority
    return CheckpointSummary(
        checkpoint_id=record.checkpoint_id,
        checkpoint_sequence=record.checkpoint_sequence,
        execution_id=a.execution_id,
        task_id=a.task_id,
        task_generation=a.task_generation,
        execution_generation=a.effective_execution_generation,
        compatibility_key=record.compatibility_key,
        harness=record.harness,
        native=record.native,
        native_session_id=record.native_session_id,
        watermark=record.watermark,
        complete=complete,
        created_at=record.created_at,
        unknown_fields=record.unknown_fields,
        schema_version=record.schema_version,
    )
