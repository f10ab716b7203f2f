"""Handoff cards: one per seat whose latest attempt was fenced, for ``status --json`` and the ledger page.

A card's ``binding`` follows the attempt's decision record, the same record a
choice is checked against: ``recovering`` while the fence's steps (release,
then decide) are still running or held and no decision record exists yet (no
choice is offered: it would be refused as not pending), ``awaiting decision``
once the record says ``recovery_pending``, ``bound`` once a decision was
accepted. The successor is the decision's replacement or, after a refused
restore, the newest relaunch of it (``relaunches`` counts them); while the
newest one's refusal waits for a relaunch, ``restore_refused`` names its
reason, message and the fix hint, and ``reason`` ends in ``restore refused:
REASON``.

A seat whose current attempt's launch is blocked (``LaunchBlocked``: a missing
provider credential Secret, a Pod the API server refuses) shows it in
``launch_blocked``: on its handoff card when the blocked attempt is the
successor, otherwise on a card of its own with binding ``launch blocked``.
"""

from __future__ import annotations

from ..swarm import SwarmSpec
from . import held, reverify
from .context import Ctx
from .models import HandoffCard, RestoreRefusedView
from .policy import card_reason, resume_label
from .relaunch import view as relaunch_view
from .store.reads import Attempt, attempts
from .store.records import RefusalRecord
from .store.writer import Writer

#: The values of ``HandoffCard.binding``.
RECOVERING, AWAITING, BOUND = "recovering", "awaiting decision", "bound"
#: A seat whose current attempt cannot be launched yet (its ``launch_blocked`` says why); such a card
#: also exists for a first attempt, which no fence precedes.
LAUNCH_BLOCKED = "launch blocked"
#: Relaunches followed from a decision's replacement to the seat's current one (a bound on reads).
MAX_RELAUNCHES = 50


def _s(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else v


def _refused_view(
    ctx: Ctx, spec: SwarmSpec, after: dict[str, Attempt], refused: RefusalRecord | None
) -> RestoreRefusedView | None:
    """The card's refusal, with the checkpoint a relaunch would resume from when this one is damaged."""
    if refused is None:
        return None
    shown = relaunch_view(refused)
    att = after.get(refused.execution_id)
    if reverify.damaged(refused) and att is not None and att.record is not None:
        found = reverify.offer(ctx, spec, att.record)
        shown = shown.model_copy(update={"offered_checkpoint": found.checkpoint_id if found else None})
    return shown


def cards(ctx: Ctx, spec: SwarmSpec) -> list[HandoffCard]:
    w = ctx.w
    pipe = w.client.pipeline(transaction=False)
    pipe.hgetall(w.keys.seat_handoffs)
    pipe.hgetall(w.keys.recovery_work)
    raw_handoffs, raw_work = pipe.execute()
    w.trip()
    handoffs = {_s(k): _s(v) for k, v in raw_handoffs.items()}
    launching = [_s(k) for k, v in raw_work.items() if _s(v) == "launch"]
    seats = [s for s in spec.seats if s.name in handoffs]
    fenced, rows = attempts(w, [*(handoffs[s.name] for s in seats), *launching], [s.task.id for s in seats])
    blocked = _blocked(fenced, launching)
    successors = [a.decision.replacement for a in fenced.values() if a.decision and a.decision.replacement]
    after = _lineage(w, successors)
    waiting = {r.execution_id: held.view(r) for r in held.live(ctx)} if fenced else {}
    out = []
    for seat in seats:
        att = fenced[handoffs[seat.name]]
        fence, decision, record = att.fence, att.decision, att.record
        if fence is None or record is None:
            continue
        bound = decision is not None and decision.mode != "recovery_pending"
        waiting_for_choice = decision is not None and decision.mode == "recovery_pending"
        row = rows.get(seat.task.id)
        successor = decision.replacement if bound and decision else None
        relaunches = 0
        while successor and successor in after and after[successor].refusal is not None:
            refusal = after[successor].refusal
            if refusal is None or refusal.relaunched_as is None or relaunches > MAX_RELAUNCHES:
                break
            successor, relaunches = refusal.relaunched_as, relaunches + 1  # the seat's lineage
        refused = after[successor].refusal if successor and successor in after else None
        outcome = after[successor].outcome if successor and successor in after else None
        if bound and decision is not None:
            d = decision.directive
            checkpoint_id = decision.checkpoint
            reason = fence.reason
            if d is not None and d.checkpoint_id is not None:
                how = "native resume" if d.recovery.value == "native" else "continue from context"
                reason = f"{fence.reason}; {how} from {d.checkpoint_id} at record {d.watermark}"
            label = None
            if d is not None and d.checkpoint_id is not None:
                label = "Resume native" if d.recovery.value == "native" else "Continue from context"
            available = decision.mode == "resume"
            if refused is not None:  # waits for the operator to fix the cause and relaunch
                reason = f"{reason}; restore refused: {refused.reason}"
        elif not waiting_for_choice:  # fence steps still running: nothing to choose yet
            checkpoint_id, reason, label, available = None, fence.reason, None, False
        else:
            ckpt = ctx.checkpoint(
                fence.execution_id,
                record.task_id,
                record.task_generation,
                spec.compatibility_key,
                restored_from=record.restore_from.execution_id if record.restore_from else None,
                namespace=record.store_namespace,
            )
            checkpoint_id = ckpt.checkpoint_id if ckpt else None
            reason = card_reason(fence, ckpt)
            label = resume_label(ckpt, fence)
            available = ckpt is not None
        stuck = blocked.pop(successor, None) if successor else None
        out.append(
            HandoffCard(
                seat=seat.name,
                execution_id=fence.execution_id,
                at=fence.fenced_at_ms,
                reason=reason,
                continuity=outcome.recovery.value if outcome else "pending",
                binding=BOUND if bound else (AWAITING if waiting_for_choice else RECOVERING),
                bound_at=decision.decided_at_ms if bound and decision else None,
                successor=successor,
                awaiting=row.awaiting if row else None,
                checkpoint=checkpoint_id,
                resume_available=available,
                resume_label=label,
                outcome=outcome,
                held=waiting.get(fence.execution_id),
                launch_blocked=stuck[0] if stuck else None,
                launch_retry_at=stuck[2] if stuck else None,
                old_attempt_stops_by=fence.old_attempt_stops_by_ms,
                restore_refused=_refused_view(ctx, spec, after, refused),
                relaunches=relaunches,
            )
        )
    order = {s.name: n for n, s in enumerate(spec.seats)}
    # A first launch (or a card-less seat's) that waits:
    for eid, (detail, since, retry_at) in blocked.items():
        record = fenced[eid].record
        name = record.seat if record is not None else ""
        if name not in order or any(c.seat == name for c in out):
            continue
        out.append(
            HandoffCard(
                seat=name,
                execution_id=eid,
                at=since,
                reason="launch_blocked",
                continuity="pending",
                binding=LAUNCH_BLOCKED,
                launch_blocked=detail,
                launch_retry_at=retry_at,
            )
        )
    out.sort(key=lambda c: order.get(c.seat, len(order)))
    return out


def _lineage(w: Writer, successors: list[str]) -> dict[str, Attempt]:
    """The successors' records, and those of every relaunch that followed a refused one."""
    found: dict[str, Attempt] = {}
    wanted = list(successors)
    for _ in range(MAX_RELAUNCHES + 1):
        if not wanted:
            break
        more, _ = attempts(w, wanted)
        found.update(more)
        wanted = [
            a.refusal.relaunched_as
            for a in more.values()
            if a.refusal is not None and a.refusal.relaunched_as and a.refusal.relaunched_as not in found
        ]
    return found


def _blocked(found: dict[str, Attempt], launching: list[str]) -> dict[str, tuple[str, int, int | None]]:
    """Attempts whose launch waits on something outside the operator: id → (why, since when, next
    try)."""
    out: dict[str, tuple[str, int, int | None]] = {}
    for eid in launching:
        att = found.get(eid)
        entry = att.journal.get("launch") if att is not None else None
        if att is None or att.record is None or entry is None or entry.status != "unknown":
            continue
        if entry.detail:
            out[eid] = (entry.detail, entry.since_ms or entry.at_ms, entry.retry_at_ms)
    return out
