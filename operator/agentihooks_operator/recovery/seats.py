"""Generation 1: admitting and launching the first attempt of every seat that has none."""

from __future__ import annotations

from ..swarm import SeatSpec, SwarmSpec
from .context import Ctx, new_execution_id, new_grant_id
from .launching import launch_step, mint
from .models import LaunchPlan
from .reads import snapshot
from .records import AttemptRecord, GrantRecord, LedgerRow


def admit_first(ctx: Ctx, spec: SwarmSpec, seat: SeatSpec) -> LaunchPlan | None:
    """Admit generation 1 of ``seat`` and launch it; ``None`` when the seat already has an attempt."""
    eid = new_execution_id()
    record = AttemptRecord(
        execution_id=eid,
        seat=seat.name,
        generation=1,
        task_id=seat.task.id,
        task_generation=1,
        grant_id=new_grant_id(),
        compatibility_key=spec.compatibility_key,
        task_text=seat.task.text,
        admitted_at_ms=ctx.now_ms(),
        epoch=ctx.w.epoch,
    )
    grant = GrantRecord(grant_id=record.grant_id, seat=seat.name, generation=1, state="active")
    row = LedgerRow(task_id=seat.task.id, seat=seat.name, text=seat.task.text, task_generation=1)
    token, digest = mint()
    payload = {
        "seat": seat.name,
        "execution_id": eid,
        "task_id": seat.task.id,
        "attempt_json": record.model_dump_json(),
        "grant_json": grant.model_dump_json(),
        "ledger_json": row.model_dump_json(),
        "cred_hash": digest,
        "marks": [[eid, "launch", "unknown"]],
    }
    ctx.point("before:admit")
    answer = ctx.w.run("admit", payload)
    ctx.point("after:admit")
    if not answer["ok"]:
        return None
    return launch_step(ctx, record, token)


def ensure_seats(ctx: Ctx, spec: SwarmSpec) -> list[LaunchPlan]:
    seats = snapshot(ctx.w).seats
    plans = []
    for seat in spec.seats:
        if seat.name in seats:
            continue
        plan = admit_first(ctx, spec, seat)
        if plan is not None:
            plans.append(plan)
    return plans
