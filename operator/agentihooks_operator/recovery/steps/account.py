"""Ending a fenced attempt's account slot at an external broker, under the journal.

The step is marked ``unknown`` before the request is sent. A confirmed
release is recorded in the fence (``released`` gains ``account``) together
with the ``ok`` mark; a refused one is marked ``failed`` and sent again on a
later pass. An unknown outcome is observed at the broker first: released →
recorded as observed; still active → ``failed`` (safe to send again); no
answer → the step is ``held`` and waits for the operator
(:mod:`..resume`). The fence never records a release nobody confirmed or saw.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from .. import held
from ..context import Ctx
from ..store.reads import one
from ..store.records import FenceRecord
from .broker import AccountBroker

STEP = "release_account"
StepResult = Literal["ok", "held", "failed"]
#: Called when the outcome cannot be observed; holds the step.
Hold = Callable[[], None]


def confirm(ctx: Ctx, execution_id: str, how: str, events: list[dict[str, Any]] | None = None) -> None:
    """Record the release in the fence (and its ``ok`` mark); ``retire`` becomes due."""
    ctx.w.run(
        "release",
        {
            "execution_id": execution_id,
            "kind": "account",
            "how": how,
            "marks": [[execution_id, STEP, "ok"], [execution_id, "retire", "unknown"]],
            "step_events": events or [],
        },
    )


def send(
    ctx: Ctx,
    fence: FenceRecord,
    broker: AccountBroker,
    hold: Hold,
    events: list[dict[str, Any]] | None = None,
) -> StepResult:
    """Mark ``unknown``, send the release once, and settle what the answer (or the broker) shows."""
    eid = fence.execution_id
    ctx.w.run("marks", {"marks": [[eid, STEP, "unknown"]], "step_events": events or []})
    ctx.point("before:broker_release")
    result = broker.release(eid)
    ctx.point("after:broker_release")
    if result == "released":
        confirm(ctx, eid, "confirmed")
        return "ok"
    if result == "failed":
        ctx.w.run("marks", {"marks": [[eid, STEP, "failed"]]})
        return "failed"
    return settle_unknown(ctx, fence, broker, hold)


def settle_unknown(ctx: Ctx, fence: FenceRecord, broker: AccountBroker, hold: Hold) -> StepResult:
    """An ``unknown`` release: look at the broker; it decides between ok, failed and held."""
    eid = fence.execution_id
    seen = broker.observe(eid)
    if seen == "applied":
        confirm(ctx, eid, "observed")
        return "ok"
    if seen == "not_applied":
        ctx.w.run("marks", {"marks": [[eid, STEP, "failed"]]})
        return "failed"
    hold()
    return "held"


def account_step(ctx: Ctx, fence: FenceRecord, broker: AccountBroker) -> StepResult:
    """The pass's account step for an external broker (under the attempt's lock)."""
    eid = fence.execution_id
    lock = ctx.lock_for(eid)
    if not lock.acquire(blocking=False):
        return "held"  # a resume of this attempt is talking to the broker now; never wait for it here
    try:
        return _account_locked(ctx, fence, broker)
    finally:
        lock.release()


def _account_locked(ctx: Ctx, fence: FenceRecord, broker: AccountBroker) -> StepResult:
    eid = fence.execution_id
    att, _ = one(ctx.w, eid)
    fence = att.fence or fence
    if "account" in fence.released:
        return "ok"
    if held.for_execution(ctx, eid) is not None:
        return "held"  # the operator owns this step until the record expires or is answered
    plan = held.plan_of(fence, STEP, broker.url)

    def hold_new() -> None:
        held.open_hold(ctx, fence, STEP, plan, reopen=False, detail="account broker cannot be observed")

    status = att.step(STEP)
    if status == "held":
        # Its record expired or was pushed out: open a new one while there is room.
        held.open_hold(ctx, fence, STEP, plan, reopen=True, detail="held again: its record was gone")
        return "held"
    if status == "unknown":
        settled = settle_unknown(ctx, fence, broker, hold_new)
        if settled != "failed":
            return settled
    return send(ctx, fence, broker, hold_new)
