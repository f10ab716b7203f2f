"""Explicit choices: a decision posted now (API) or recorded for the next pass (CLI).

A choice is accepted once per fenced attempt. Repeating the accepted choice
returns the stored decision and admits nothing; any other choice, or a choice
for an attempt that is not waiting, is refused with the spec's message. A
recorded request that reaches a pass after its attempt was fenced but before
the decision step wrote that the attempt waits (another thread of the same
controller is between the two) is kept for a later pass, not refused.
"""

from __future__ import annotations

import json
import logging
import time

from ...swarm import SwarmSpec
from .. import workerlease
from ..context import Ctx
from ..errors import NO_CHECKPOINT, NOT_PENDING, InvalidInput, NotDecidedYet, RecoveryRefused
from ..models import EXECUTION_RE, Choice, DecisionResult, PassReport, Refusal
from ..store.reads import Snapshot, one
from ..store.records import DecisionRecord, RecoveryRequest
from .deciding import accept, result_of

log = logging.getLogger("agentihooks.recovery")

CHOICES = ("resume", "fresh")
#: How long a recorded request for a fenced, not yet decided attempt is kept for later passes.
KEEP_UNDECIDED_MS = 300_000


def check_choice(execution_id: str, choice: str) -> None:
    if not isinstance(execution_id, str) or not EXECUTION_RE.fullmatch(execution_id):
        raise InvalidInput(f"not an execution id: {execution_id!r} (expected exe-<32 hex>)")
    if choice not in CHOICES:
        raise InvalidInput(f"not a recovery choice: {choice!r} (expected resume or fresh)")


def _replay(decision: DecisionRecord, choice: Choice) -> DecisionResult:
    """The accepted choice again (also after a fresh relaunch rewrote the decision it led to): the
    decision as it stands, nothing admitted; any other choice is refused."""
    if choice in (decision.mode, decision.accepted_choice):
        return result_of(decision, replayed=True)
    raise RecoveryRefused(NOT_PENDING, reason="not_pending")


def apply_choice(
    ctx: Ctx, execution_id: str, choice: Choice, decided_by: str, spec: SwarmSpec | None
) -> DecisionResult:
    """Accept ``choice`` for the fenced attempt ``execution_id`` or raise :class:`RecoveryRefused`."""
    check_choice(execution_id, choice)
    if not decided_by or len(decided_by) > 200:
        raise InvalidInput("decided_by must name the operator or a master agent")
    att, _ = one(ctx.w, execution_id)
    fence, decision, record = att.fence, att.decision, att.record
    if fence is not None and record is not None and decision is None:
        raise NotDecidedYet(NOT_PENDING, reason="not_pending")
    if fence is None or decision is None or record is None:
        raise RecoveryRefused(NOT_PENDING, reason="not_pending")
    if decision.mode != "recovery_pending":
        return _replay(decision, choice)
    compatibility_key = spec.compatibility_key if spec is not None else record.compatibility_key
    checkpoint = None
    if choice == "resume":
        checkpoint = ctx.checkpoint(
            execution_id,
            record.task_id,
            record.task_generation,
            compatibility_key,
            restored_from=record.restore_from.execution_id if record.restore_from else None,
            namespace=record.store_namespace,
        )
        if checkpoint is None:
            raise RecoveryRefused(NO_CHECKPOINT, reason="no_checkpoint")
    _, row = one(ctx.w, execution_id, record.task_id)
    done = accept(
        ctx,
        record=record,
        fence=fence,
        row=row,
        choice=choice,
        decided_by=decided_by,
        checkpoint=checkpoint,
        compatibility_key=compatibility_key,
        worker_lease_ms=workerlease.lease_ms(spec, record.worker_lease_ms),
        expect="pending",
        marks=[],
    )
    if done.wrote and done.decision is not None:
        return result_of(done.decision, replayed=False)
    if done.decision is not None:
        return _replay(done.decision, choice)
    raise RecoveryRefused(NOT_PENDING, reason="not_pending")


def apply_requests(ctx: Ctx, spec: SwarmSpec, snap: Snapshot, report: PassReport) -> None:
    """Apply every recorded request in the order it was recorded, then drop them all."""
    if not snap.requests:
        return
    ordered = sorted(
        snap.requests.items(),
        key=lambda kv: (kv[1].recorded_at_ms or 0, kv[1].recorded_ns or 0, kv[0]),
    )
    drop: list[str] = []
    counts: list[str] = []
    now = ctx.now_ms()
    for field, req in ordered:
        try:
            result = apply_choice(ctx, req.execution_id, req.choice, req.agent, spec)
            if not result.replayed:
                report.decisions.append(result)
                if result.replacement:
                    report.launches.append(result.replacement)
        except NotDecidedYet as e:
            # Posted once the fence was visible, read before the decision was written: a later pass
            # applies it (for a bounded time; then it is refused like any other).
            if now - (req.recorded_at_ms or 0) < KEEP_UNDECIDED_MS:
                continue
            _refused(req, e.message, e.reason, report, counts)
        except RecoveryRefused as e:
            _refused(req, e.message, e.reason, report, counts)
        except InvalidInput as e:
            _refused(req, str(e), "invalid_input", report, counts)
        drop.append(field)
    if drop:
        ctx.w.run("marks", {"drop": drop, "counts": counts})


def _refused(req: RecoveryRequest, reason: str, code: str, report: PassReport, counts: list[str]) -> None:
    log.warning("controller: the recovery request for %s was refused: %s", req.execution_id, reason)
    report.refusals.append(
        Refusal(execution_id=req.execution_id, choice=req.choice, agent=req.agent, reason=reason)
    )
    counts.append(f"refusals_by_reason:{code}")


def request_field(execution_id: str, choice: str) -> str:
    return f"{execution_id}|{choice}"


def record_request(ctx: Ctx, execution_id: str, choice: Choice, agent: str) -> bool:
    """Store a request (deduplicated by attempt and choice); not a controller write, so no lease."""
    check_choice(execution_id, choice)
    if not agent or len(agent) > 200:
        raise InvalidInput("agent must name who asks")
    body = json.dumps(
        {
            "execution_id": execution_id,
            "choice": choice,
            "agent": agent,
            "recorded_at_ms": ctx.now_ms(),
            "recorded_ns": time.time_ns(),
        }
    )
    ctx.w.trip()
    return bool(ctx.w.client.hsetnx(ctx.w.keys.recovery_requests, request_field(execution_id, choice), body))
