"""Generation 1: admitting and launching the first attempt of every seat that has none, in batches.

A swarm of 10,000 seats must be admitted well inside one lease TTL, so a seat
is not a round trip: one guarded ``admit`` script admits a whole batch
(:data:`BATCH` seats), the batch's launches are sent one by one (the
Kubernetes side, unchanged), and one ``marks`` script marks those that were
sent ``ok``. The lease is renewed before every batch after the first, so a
long admission (its launches included) never outlives it.

Nothing happens twice, whatever crashes:

* the script admits only seats that have no attempt, inside Redis, so a batch
  sent again (or a seat admitted meanwhile) admits nothing twice;
* an admitted seat's ``launch`` step is ``unknown`` from the same script and
  its attempt stays in ``recovery-work`` until marked ``ok``; a crash between
  the admission and the marks leaves exactly that, and the next pass observes
  each Pod before sending its launch again (:func:`.launching.launch_step`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...swarm import SeatSpec, SwarmSpec
from .. import workerlease
from ..context import Ctx, new_execution_id, new_grant_id
from ..errors import LaunchBlocked
from ..models import LaunchPlan
from ..store.records import AttemptRecord, GrantRecord, LedgerRow
from ..store.seatsmap import SeatsReader
from .launching import mint, note_blocked, plan_for

#: Seats admitted by one script: each such script holds Redis for about 6 ms (``bench/admission.py``);
#: larger batches save round trips but not time (the records are built in Python either way).
BATCH = 200


class Admitted:
    """The seat names admitted so far, read once per admission (:mod:`..store.seatsmap`), and the spec last
    found to have none missing: a pass whose spec and seats did not move checks nothing per seat."""

    def __init__(self, reader: SeatsReader) -> None:
        self._reader = reader
        self.names: set[str] = set()
        self._complete: list[SeatSpec] | None = None  # held, so its identity is never reused

    def missing(self, spec: SwarmSpec) -> list[SeatSpec]:
        flat = self._reader.moved()
        if flat is not None:  # seats were admitted (by this process or another) since the last read
            self.names, self._complete = set(flat), None
        if self._complete is spec.seats:
            return []
        missing = [seat for seat in spec.seats if seat.name not in self.names]
        self._complete = None if missing else spec.seats
        return missing


def ensure_seats(
    ctx: Ctx, spec: SwarmSpec, renew: Callable[[], None], batch: int = BATCH, admitted: Admitted | None = None
) -> list[LaunchPlan]:
    """Admit and launch generation 1 of every seat without an attempt; ``renew`` keeps the lease
    (raises :class:`~..errors.LeaseLost` when it is gone) and runs before each batch after the first.
    ``admitted`` is what the caller knows from earlier passes (a new one reads the seat names)."""
    if batch < 1:
        raise ValueError(f"the admission batch must be at least 1 seat, not {batch}")
    known = admitted or Admitted(SeatsReader(ctx.w.client, ctx.w.keys, "names"))
    try:
        missing = known.missing(spec)
    finally:
        ctx.w.trip()
    plans: list[LaunchPlan] = []
    for n, start in enumerate(range(0, len(missing), batch)):
        if n:
            renew()
        plans.extend(_admit_batch(ctx, spec, missing[start : start + batch]))
    return plans


def _admit_batch(ctx: Ctx, spec: SwarmSpec, chunk: list[SeatSpec]) -> list[LaunchPlan]:
    now = ctx.now_ms()
    drafts: dict[str, tuple[AttemptRecord, str]] = {}
    entries: list[dict[str, Any]] = []
    for seat in chunk:
        record = AttemptRecord(
            execution_id=new_execution_id(),
            seat=seat.name,
            generation=1,
            task_id=seat.task.id,
            task_generation=1,
            grant_id=new_grant_id(),
            compatibility_key=spec.compatibility_key,
            task_text=seat.task.text,
            admitted_at_ms=now,
            epoch=ctx.w.epoch,
            store_namespace=ctx.w.keys.namespace,
            worker_lease_ms=workerlease.lease_ms(spec, None),
        )
        grant = GrantRecord(grant_id=record.grant_id, seat=seat.name, generation=1, state="active")
        row = LedgerRow(task_id=seat.task.id, seat=seat.name, text=seat.task.text, task_generation=1)
        token, digest = mint()
        drafts[record.execution_id] = (record, token)
        entries.append(
            {
                "seat": seat.name,
                "execution_id": record.execution_id,
                "task_id": seat.task.id,
                "attempt_json": record.model_dump_json(),
                "grant_json": grant.model_dump_json(),
                "ledger_json": row.model_dump_json(),
                "cred_hash": digest,
            }
        )
    ctx.point("before:admit")
    answer = ctx.w.run("admit", {"seats": entries})
    ctx.point("after:admit")
    plans: list[LaunchPlan] = []
    for eid in answer.get("admitted") or []:  # Lua's cjson writes an empty list as {}
        record, token = drafts[eid]
        plan = _launch(ctx, record, token)
        if plan is not None:
            plans.append(plan)
    if plans:
        sent = [p.execution_id for p in plans]
        ctx.w.run("marks", {"marks": [[e, "launch", "ok"] for e in sent], "finish": sent})
    return plans


def _launch(ctx: Ctx, record: AttemptRecord, token: str) -> LaunchPlan | None:
    """Send the launch of a just-admitted attempt (known unsent); its ``ok`` mark comes with the
    batch's. A launch the launcher cannot send yet stays ``unknown`` with its reason, as in
    :func:`.launching.launch_step`."""
    eid = record.execution_id
    plan = plan_for(record, token, ctx.w.epoch)
    with ctx.lock_for(eid):
        ctx.point("before:launch")
        try:
            ctx.launcher.launch(plan)
        except LaunchBlocked as e:
            note_blocked(ctx, record, e)
            return None
        ctx.point("after:launch")
    return plan
