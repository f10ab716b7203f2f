"""A replacement refused its checkpoint as damaged: the seat is offered the newest one that verifies now.

A worker hashes every object before its harness starts. When it finds the
checkpoint its directive names damaged or gone (``corrupt_object``,
``missing_object``, ``corrupt_manifest``, ``manifest_absent``,
``inventory_mismatch``), relaunching the same directive would only be refused
again. So the controller forgets what it remembered of that checkpoint (it is
hashed again at the next look, and passed over if the worker was right), the
seat's card offers the newest checkpoint of the fenced attempt's lineage that
verifies now (``restore_refused.offered_checkpoint``), and a relaunch that is
not ``--fresh`` resumes from that one (natively when its session is the
fenced one's, else reconstructed) instead. With no checkpoint left that
verifies, the relaunch is refused ``no_checkpoint``: relaunch ``--fresh``.
"""

from __future__ import annotations

from agentihooks_checkpoint.catalog import CheckpointSummary
from agentihooks_checkpoint.directive import RestoreDirective
from agentihooks_checkpoint.reasons import reason_token
from agentihooks_checkpoint.scope import StoreScope

from ..swarm import SwarmSpec
from .context import Ctx
from .errors import RecoveryRefused
from .policy import resume_directive
from .store.reads import one
from .store.records import AttemptRecord, RefusalRecord

#: The refusals that say the checkpoint itself cannot be restored (not the worker's setup).
DAMAGED = frozenset(
    {"corrupt_object", "missing_object", "corrupt_manifest", "manifest_absent", "inventory_mismatch"}
)
NONE_VERIFIES = "no checkpoint of this seat verifies any more: relaunch --fresh"


def damaged(refusal: RefusalRecord | None) -> bool:
    return refusal is not None and reason_token(refusal.reason) in DAMAGED


def forget_refused(ctx: Ctx, record: AttemptRecord) -> None:
    """What the controller remembered of the refused checkpoint is dropped: hashed again next time."""
    directive = record.directive
    if directive is None or directive.checkpoint_id is None or ctx.verifications is None:
        return
    ctx.verifications.forget(_scope(ctx, record), directive.checkpoint_id)


def offer(ctx: Ctx, spec: SwarmSpec | None, record: AttemptRecord) -> CheckpointSummary | None:
    """The newest checkpoint of the fenced attempt's lineage that verifies now (``None``: none)."""
    if record.restore_from is None:
        return None
    fenced, _ = one(ctx.w, record.restore_from.execution_id)
    earlier = fenced.record.restore_from if fenced.record is not None else None
    return ctx.checkpoint(
        record.restore_from.execution_id,
        record.task_id,
        record.task_generation,
        spec.compatibility_key if spec is not None else record.compatibility_key,
        restored_from=earlier.execution_id if earlier is not None else None,
        namespace=record.store_namespace,
    )


def redirect(ctx: Ctx, spec: SwarmSpec | None, record: AttemptRecord) -> RestoreDirective:
    """The directive a relaunch after a damaged checkpoint carries; raises when none verifies."""
    found = offer(ctx, spec, record)
    assert record.restore_from is not None
    fenced, _ = one(ctx.w, record.restore_from.execution_id)
    if found is None or fenced.fence is None:
        raise RecoveryRefused(NONE_VERIFIES, reason="no_checkpoint")
    return resume_directive(found, fenced.fence)


def _scope(ctx: Ctx, record: AttemptRecord) -> StoreScope:
    return StoreScope(
        swarm=ctx.swarm,
        task_id=record.task_id,
        task_generation=record.task_generation,
        namespace=record.store_namespace,
    )
