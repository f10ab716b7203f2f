"""Restore outcomes reported by replacements, and the heartbeats the fence reads.

An outcome is accepted only from the replacement's own execution, only while it
is the seat's current attempt, and only when it equals the accepted directive.
Storing it writes the task's held ``awaiting`` value back (once) and counts it
under ``restore_outcomes_by_type``.
"""

from __future__ import annotations

import re

from agentihooks_checkpoint.directive import IDENTIFIER, RestoreOutcome

from .context import Ctx
from .errors import InvalidInput, RecoveryRefused
from .models import EXECUTION_RE
from .store.reads import attempts, one
from .store.records import StoredOutcome

NOT_OWN = "an outcome is accepted only from the replacement's own execution"
NOT_REPLACEMENT = "this execution is not a replacement with an accepted directive"
NOT_CURRENT = "this replacement is no longer the seat's current attempt"
MISMATCH = "the outcome does not match the accepted directive"
CONFLICT = "a different outcome was already reported for this replacement"


def _same(stored: StoredOutcome, outcome: RestoreOutcome) -> bool:
    return (
        stored.recovery == outcome.recovery
        and stored.checkpoint_id == outcome.checkpoint_id
        and stored.session_id == outcome.session_id
        and stored.watermark == outcome.watermark
    )


def check_execution(execution_id: str) -> None:
    if not isinstance(execution_id, str) or not EXECUTION_RE.fullmatch(execution_id):
        raise InvalidInput(f"not an execution id: {execution_id!r} (expected exe-<32 hex>)")


def report_outcome(ctx: Ctx, execution_id: str, outcome: RestoreOutcome) -> StoredOutcome:
    check_execution(execution_id)
    if outcome.execution_id != execution_id:
        raise RecoveryRefused(NOT_OWN, reason="not_own")
    att, _ = one(ctx.w, execution_id)
    record = att.record
    if record is None or record.directive is None or record.restore_from is None:
        raise RecoveryRefused(NOT_REPLACEMENT, reason="not_replacement")
    if att.outcome is not None:
        if _same(att.outcome, outcome):
            return att.outcome
        raise RecoveryRefused(CONFLICT, reason="outcome_conflict")
    if record.state == "fenced":
        raise RecoveryRefused(NOT_CURRENT, reason="not_current")
    if not outcome.matches(record.directive):
        raise RecoveryRefused(MISMATCH, reason="directive_mismatch")
    source, _ = attempts(ctx.w, [record.restore_from.execution_id])
    fence = source[record.restore_from.execution_id].fence
    stored = StoredOutcome(
        execution_id=execution_id,
        recovery=outcome.recovery,
        checkpoint_id=outcome.checkpoint_id,
        session_id=outcome.session_id,
        watermark=outcome.watermark,
        archive_watermark=fence.archive_watermark if fence else None,
        restored_from=record.restore_from.execution_id,
        reported_at_ms=0,
    )
    payload = {
        "execution_id": execution_id,
        "recovery": outcome.recovery.value,
        "stored_json": stored.model_dump_json(),
    }
    ctx.point("before:outcome")
    answer = ctx.w.run("outcome", payload)
    ctx.point("after:outcome")
    if answer["ok"]:
        return StoredOutcome.model_validate_json(answer["stored"])
    if answer["refused"] == "reported":
        existing = StoredOutcome.model_validate_json(answer["existing"])
        if _same(existing, outcome):
            return existing
        raise RecoveryRefused(CONFLICT, reason="outcome_conflict")
    raise RecoveryRefused(NOT_CURRENT, reason="not_current")


def heartbeat(
    ctx: Ctx,
    execution_id: str,
    *,
    session_id: str | None,
    watermark: int | None,
    final: bool = False,
    lease: bool = False,
) -> dict[str, int | None]:
    """Record a heartbeat of a current attempt; a fenced attempt's heartbeat is refused.

    ``final``: the watermark is that of the worker's final capture, after its harness exited.
    ``lease``: it renews the attempt's worker lease too. Returns ``lease_ms`` (``None`` for an attempt
    launched without a lease) and ``renewed_at_ms`` (swarm clock)."""
    check_execution(execution_id)
    if watermark is not None and (isinstance(watermark, bool) or watermark < 0):
        raise InvalidInput("watermark must be a non-negative integer")
    if session_id is not None and not re.fullmatch(IDENTIFIER, session_id):
        raise InvalidInput("session_id is not an identifier")
    if final and watermark is None:
        raise InvalidInput("a final report names the watermark its final capture reached")
    answer = ctx.w.run(
        "heartbeat",
        {
            "execution_id": execution_id,
            "session_id": session_id,
            "watermark": watermark,
            "final": final,
            "lease": lease,
        },
    )
    if not answer["ok"]:
        raise RecoveryRefused(NOT_CURRENT.replace("replacement", "attempt"), reason="not_current")
    return {"lease_ms": answer.get("lease_ms"), "renewed_at_ms": answer.get("renewed_at_ms")}
