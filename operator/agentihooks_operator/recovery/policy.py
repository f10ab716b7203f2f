"""Pure decision rules: which checkpoint a resume uses, when to resume without asking, card wording.

No Redis and no I/O here, so unit tests can cover every rule directly.
"""

from __future__ import annotations

from collections.abc import Iterable

from agentihooks_checkpoint.catalog import CheckpointSummary, newest_compatible
from agentihooks_checkpoint.directive import Continuity, RestoreDirective, parse_directive

from .models import Choice
from .store.records import FenceRecord

RESUME_NATIVE = "Resume native"
CONTINUE_FROM_CONTEXT = "Continue from context"


def usable_checkpoint(
    summaries: Iterable[CheckpointSummary], compatibility_key: str
) -> CheckpointSummary | None:
    """The newest complete checkpoint captured under ``compatibility_key`` that names its watermark."""
    return newest_compatible((s for s in summaries if s.watermark is not None), compatibility_key)


def usable_checkpoints(
    summaries: Iterable[CheckpointSummary], compatibility_key: str
) -> list[CheckpointSummary]:
    """Every checkpoint :func:`usable_checkpoint` could pick, newest first (its pick is the first)."""
    usable = [
        s
        for s in summaries
        if s.complete and s.compatibility_key == compatibility_key and s.watermark is not None
    ]
    return sorted(usable, key=lambda s: (s.checkpoint_sequence, s.created_at), reverse=True)


def native_possible(checkpoint: CheckpointSummary, fence: FenceRecord) -> bool:
    """Native continuity needs a native checkpoint of the very session the fenced attempt held.

    A checkpoint of another session (the attempt moved on to a new conversation after it was
    captured, or reported none the checkpoint knows) could only be refused by the replacement as
    ``conversation_mismatch``; it is offered as context continuation instead.
    """
    return (
        checkpoint.native
        and fence.native_session is not None
        and checkpoint.native_session_id == fence.native_session
    )


def resume_directive(checkpoint: CheckpointSummary, fence: FenceRecord) -> RestoreDirective:
    """The directive of a resume from ``checkpoint`` (native when possible, else reconstructed)."""
    if native_possible(checkpoint, fence):
        data = {
            "checkpoint_id": checkpoint.checkpoint_id,
            "recovery": Continuity.NATIVE.value,
            "session_id": fence.native_session,
            "watermark": checkpoint.watermark,
        }
    else:
        data = {
            "checkpoint_id": checkpoint.checkpoint_id,
            "recovery": Continuity.RECONSTRUCTED.value,
            "watermark": checkpoint.watermark,
        }
    return parse_directive(data)


FRESH = RestoreDirective(recovery=Continuity.FRESH)


def automatic_choice(
    fence: FenceRecord,
    *,
    automation: bool,
    paused: bool,
    checkpoint: CheckpointSummary | None,
) -> Choice | None:
    """What the controller chooses on its own, or ``None`` when the seat must wait for a decision."""
    if not automation or paused:
        return None
    if fence.superseded_legacy:
        return "fresh"
    if fence.reason == "image_pull" or fence.native_session is None:
        return None
    if checkpoint is not None and native_possible(checkpoint, fence):
        return "resume"
    return None


def needs_catalog(fence: FenceRecord, *, automation: bool, paused: bool) -> bool:
    """Whether :func:`automatic_choice` could answer ``resume`` (so listing checkpoints is worth it)."""
    return (
        automation
        and not paused
        and not fence.superseded_legacy
        and fence.reason != "image_pull"
        and fence.native_session is not None
    )


def decider_kind(decided_by: str) -> str:
    """The metric label of a decider: automation, operator or master (never a free-form name)."""
    if decided_by in ("automation", "operator"):
        return decided_by
    return "master"


def resume_label(checkpoint: CheckpointSummary | None, fence: FenceRecord) -> str | None:
    if checkpoint is None:
        return None
    return RESUME_NATIVE if native_possible(checkpoint, fence) else CONTINUE_FROM_CONTEXT


def card_reason(fence: FenceRecord, checkpoint: CheckpointSummary | None) -> str:
    """``oom_killed; native resume from ckpt-7 at record 412`` (or just the reason)."""
    if checkpoint is None:
        return fence.reason
    how = "native resume" if native_possible(checkpoint, fence) else "continue from context"
    return f"{fence.reason}; {how} from {checkpoint.checkpoint_id} at record {checkpoint.watermark}"
