"""Accepting a decision for a fenced attempt: the decision record, the replacement's admission, its launch.

The automatic pass and the explicit paths (API, recorded CLI requests) share
:func:`accept`. The decide script accepts at most one decision per fenced
attempt: a compare-and-set on ``attempt-recoveries`` inside the script, so
concurrent requests cannot both admit a replacement.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from agentihooks_checkpoint.catalog import CheckpointSummary

from ..context import Ctx, new_execution_id, new_grant_id
from ..models import Choice, DecisionResult, LaunchPlan
from ..policy import FRESH, decider_kind, resume_directive
from ..store.records import AttemptRecord, DecisionRecord, FenceRecord, GrantRecord, LedgerRow, RestoreSource
from .launching import Alongside, launch_step, mint


@dataclass
class Accepted:
    """The decide script's answer: the decision now stored, and whether this call wrote it."""

    decision: DecisionRecord | None
    wrote: bool
    refused: str | None
    plan: LaunchPlan | None = None


def result_of(decision: DecisionRecord, *, replayed: bool) -> DecisionResult:
    return DecisionResult(
        execution_id=decision.execution_id,
        mode=decision.mode,
        checkpoint=decision.checkpoint,
        replacement=decision.replacement,
        directive=decision.directive,
        decided_by=decision.decided_by,
        replayed=replayed,
    )


def accept(
    ctx: Ctx,
    *,
    record: AttemptRecord,
    fence: FenceRecord,
    row: LedgerRow | None,
    choice: Choice | None,
    decided_by: str,
    checkpoint: CheckpointSummary | None,
    compatibility_key: str,
    expect: str,
    marks: list[list[str]],
    alongside: Alongside | None = None,
    worker_lease_ms: int | None = None,
) -> Accepted:
    """Store ``choice`` (``None``: the attempt waits) and admit and launch the replacement.

    ``expect`` is ``absent`` for the pass's first decision on the attempt, ``pending`` for an
    explicit choice on an attempt that waits. ``alongside`` (with a choice) is sent beside the
    replacement's launch and finishes the fenced attempt's open work with it.
    """
    eid = fence.execution_id
    now = ctx.now_ms()
    if choice is None:
        decision = DecisionRecord(
            execution_id=eid,
            generation=fence.generation,
            reason=fence.reason,
            mode="recovery_pending",
            controller_epoch=ctx.w.epoch,
        )
        payload: dict[str, object] = {
            "execution_id": eid,
            "expect": expect,
            "mode": "recovery_pending",
            "decision_json": decision.model_dump_json(),
            "admission": None,
            "detail": "recovery_pending",
            "marks": [*marks, [eid, "decide", "held"]],
            "finish": [eid],
        }
        new_record = None
        token = None
    else:
        if choice == "resume":
            if checkpoint is None:
                raise ValueError("a resume needs a checkpoint")
            directive = resume_directive(checkpoint, fence)
        else:
            directive = FRESH
        new_record = AttemptRecord(
            execution_id=new_execution_id(),
            seat=fence.seat,
            generation=fence.generation + 1,
            task_id=record.task_id,
            task_generation=record.task_generation,
            grant_id=new_grant_id(),
            compatibility_key=compatibility_key,
            task_text=row.text if row is not None else record.task_text,
            directive=directive,
            # The attempt that captured the checkpoint: the fenced one, or (the seat's lineage) the one
            # it restored from when it captured none of its own.
            restore_from=(
                RestoreSource(
                    execution_id=checkpoint.execution_id, execution_generation=checkpoint.execution_generation
                )
                if checkpoint is not None and choice == "resume"
                else RestoreSource(execution_id=eid, execution_generation=fence.generation)
            ),
            admitted_at_ms=now,
            epoch=ctx.w.epoch,
            store_namespace=record.store_namespace,
            replaces=eid,
            worker_lease_ms=worker_lease_ms if worker_lease_ms is not None else record.worker_lease_ms,
        )
        new = new_record.execution_id
        decision = DecisionRecord(
            execution_id=eid,
            generation=fence.generation,
            reason=fence.reason,
            mode=choice,
            checkpoint=directive.checkpoint_id,
            replacement=new,
            directive=directive,
            decided_by=decided_by,
            decided_at_ms=now,
            controller_epoch=ctx.w.epoch,
        )
        grant = GrantRecord(
            grant_id=new_record.grant_id, seat=fence.seat, generation=new_record.generation, state="active"
        )
        ledger_recovery = {
            **directive.model_dump(mode="json"),
            "status": "accepted",
            "fenced": eid,
            "replacement": new,
        }
        token, digest = mint()
        payload = {
            "execution_id": eid,
            "expect": expect,
            "mode": choice,
            "decider_kind": decider_kind(decided_by),
            "decision_json": decision.model_dump_json(),
            "admission": {
                "execution_id": new,
                "attempt_json": new_record.model_dump_json(),
                "grant_json": grant.model_dump_json(),
                "cred_hash": digest,
                "task_id": record.task_id,
                "ledger_recovery_json": json.dumps(ledger_recovery),
            },
            "detail": f"{choice} ({directive.recovery.value}) by {decider_kind(decided_by)}",
            "marks": [*marks, [eid, "decide", "ok"], [new, "launch", "unknown"]],
            "finish": [] if alongside is not None else [eid],
        }
    ctx.point("before:decide")
    answer = ctx.w.run("decide", payload)
    ctx.point("after:decide")
    if not answer["ok"]:
        existing = answer.get("existing")
        stored = DecisionRecord.model_validate_json(existing) if existing else None
        return Accepted(decision=stored, wrote=False, refused=answer["refused"])
    plan = None
    if new_record is not None:
        plan = launch_step(ctx, new_record, token, alongside, stops_by=fence.old_attempt_stops_by_ms)
    return Accepted(decision=decision, wrote=True, refused=None, plan=plan)
