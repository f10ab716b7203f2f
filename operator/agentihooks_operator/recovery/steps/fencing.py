"""The steps of a failed attempt: fence → release grant → release account → decide → launch ‖ retire.

With an external account broker the account step is :func:`.account.account_step`
(journaled; it may stop the attempt's recovery as ``held``).

Each step is journaled. Fence and releases are atomic Lua scripts whose journal
marks are written in the same script, so a resumed pass simply skips what the
journal (or the fence's ``released`` list) shows as done. Retiring the fenced
Pod is not atomic with Redis: it is marked ``unknown`` by the account release,
and a resumed pass observes the Pod before deleting it again. Its authority is
revoked by the fence already, so when a replacement is launched the deletion
goes out beside that launch (:class:`~.launching.Alongside`) and is marked
``ok`` by the launch's own journal script; when the attempt waits for a
decision it is deleted before the decision record is written, as before.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ...swarm import SwarmSpec
from .. import workerlease
from ..context import Ctx
from ..models import PassReport
from ..policy import automatic_choice, needs_catalog
from ..store.reads import Attempt, one
from ..store.records import FenceRecord, LedgerRow
from .account import account_step
from .deciding import accept, result_of
from .launching import Alongside

log = logging.getLogger("agentihooks.recovery")


@dataclass(frozen=True)
class Failure:
    """A failed current attempt as observed this pass."""

    execution_id: str
    seat: str
    generation: int
    reason: str
    superseded_legacy: bool = False
    #: Every container of its Pod was seen terminated: nothing of the attempt runs any more, so its
    #: replacement need not wait for the worker's lease to run out.
    proven: bool = False


def fence_step(ctx: Ctx, att: Attempt, failure: Failure, report: PassReport) -> FenceRecord | None:
    eid = att.execution_id
    draft = FenceRecord(
        execution_id=eid,
        generation=failure.generation,
        seat=failure.seat,
        reason=failure.reason,
        controller_epoch=ctx.w.epoch,
        fenced_at_ms=0,
        tail="",
        superseded_legacy=failure.superseded_legacy,
        task_id=att.record.task_id if att.record else None,
    )
    payload = {
        "execution_id": eid,
        "seat": failure.seat,
        "observed_generation": failure.generation,
        "reason": failure.reason,
        "fence_json": draft.model_dump_json(),
        "proven": failure.proven,
        "margin_base_ms": workerlease.BASE_MARGIN_MS,
        "margin_rate": workerlease.RATE_MARGIN,
        "marks": [[eid, "fence", "ok"], [eid, "hold", "ok"]],
    }
    ctx.point("before:fence")
    answer = ctx.w.run("fence", payload)
    ctx.point("after:fence")
    if not answer["ok"]:
        log.info(
            "recovery of swarm %s: %s (generation %s) is not the current attempt of seat %s: not fenced (%s)",
            ctx.label,
            eid,
            failure.generation,
            failure.seat,
            answer["refused"],
        )
        report.skipped_stale.append(eid)
        return None
    fence = FenceRecord.model_validate_json(answer["fence"])
    if not answer["existing"]:
        report.fenced.append(eid)
        if fence.old_attempt_stops_by_ms is not None:
            log.warning(
                "recovery of swarm %s: %s (%s) is fenced but may still run: its replacement is %s",
                ctx.label,
                eid,
                failure.reason,
                workerlease.wait_message(fence.old_attempt_stops_by_ms),
            )
    return fence


def recover(
    ctx: Ctx,
    spec: SwarmSpec,
    att: Attempt,
    failure: Failure | None,
    *,
    paused: bool,
    row: LedgerRow | None,
    report: PassReport,
) -> None:
    """Advance one failed attempt as far as its steps go this pass (``failure`` None: resumed work)."""
    eid = att.execution_id
    fence = att.fence
    if fence is None:
        if failure is None:
            return
        fence = fence_step(ctx, att, failure, report)
        if fence is None:
            return
    released = set(fence.released)
    if "grant" not in released:
        ctx.point("before:release_grant")
        ctx.w.run("release", {"execution_id": eid, "kind": "grant", "marks": [[eid, "release_grant", "ok"]]})
        ctx.point("after:release_grant")
    retire_unsent = False
    broker = ctx.broker(spec)
    if "account" not in released and broker is not None:
        # An external broker: journaled, observed before re-sending, possibly held for the operator.
        step = account_step(ctx, fence, broker)
        if step != "ok":
            if step == "held":
                report.held.append(eid)
            return
        retire_unsent = att.step("retire") is None
    elif "account" not in released:
        ctx.point("before:release_account")
        ctx.w.run(
            "release",
            {
                "execution_id": eid,
                "kind": "account",
                "how": "built-in",
                "marks": [[eid, "release_account", "ok"], [eid, "retire", "unknown"]],
            },
        )
        ctx.point("after:release_account")
        retire_unsent = True
    retire_pending = retire_unsent or att.step("retire") != "ok"
    record = att.record
    if att.step("decide") in ("ok", "held") or record is None:
        if retire_pending:
            _retire(ctx, eid, retire_unsent, report)
            ctx.w.run("marks", {"marks": [[eid, "retire", "ok"]], "finish": [eid]})
        return
    automation = spec.recovery.automation
    checkpoint = None
    if needs_catalog(fence, automation=automation, paused=paused):
        checkpoint = ctx.checkpoint(
            eid,
            record.task_id,
            record.task_generation,
            spec.compatibility_key,
            restored_from=record.restore_from.execution_id if record.restore_from else None,
            namespace=record.store_namespace,
        )
    choice = automatic_choice(fence, automation=automation, paused=paused, checkpoint=checkpoint)
    if row is None and choice is not None:
        # Resumed work: read the task's current row so a replacement starts from its current text.
        _, row = one(ctx.w, eid, record.task_id)
    marks: list[list[str]] = []
    alongside = None
    if retire_pending and choice is not None:
        # A replacement follows: the fenced Pod's deletion goes out beside its launch, off its path.
        alongside = Alongside(
            send=lambda: _retire(ctx, eid, retire_unsent, report),
            marks=[[eid, "retire", "ok"]],
            finish=[eid],
        )
    elif retire_pending:  # the attempt waits for a decision: nothing to launch, retire first
        _retire(ctx, eid, retire_unsent, report)
        marks.append([eid, "retire", "ok"])
    done = accept(
        ctx,
        record=record,
        fence=fence,
        row=row,
        choice=choice,
        decided_by="automation",
        checkpoint=checkpoint,
        compatibility_key=spec.compatibility_key,
        worker_lease_ms=workerlease.lease_ms(spec, record.worker_lease_ms),
        expect="absent",
        marks=marks,
        alongside=alongside,
    )
    if done.decision is not None:
        report.decisions.append(result_of(done.decision, replayed=not done.wrote))
    if done.plan is not None:
        report.launches.append(done.plan.execution_id)
    if alongside is not None and not alongside.marked:  # no launch went out (refused, blocked)
        alongside.finish_alone(ctx)


def _retire(ctx: Ctx, eid: str, unsent: bool, report: PassReport) -> None:
    """Delete the fenced Pod: at once when the journal says it was not sent, else only if it is there."""
    if unsent or ctx.launcher.exists(eid):
        ctx.point("before:retire")
        ctx.launcher.retire(eid)
        ctx.point("after:retire")
        report.retired.append(eid)
