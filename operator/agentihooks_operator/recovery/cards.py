"""Handoff cards: one per seat whose latest attempt was fenced, for ``status --json`` and the ledger page.

A card's ``binding`` follows the attempt's decision record, the same record a
choice is checked against: ``recovering`` while the fence's steps (release,
then decide) are still running or held and no decision record exists yet (no
choice is offered: it would be refused as not pending), ``awaiting decision``
once the record says ``recovery_pending``, ``bound`` once a decision was
accepted.
"""

from __future__ import annotations

from ..swarm import SwarmSpec
from . import held
from .context import Ctx
from .models import HandoffCard
from .policy import card_reason, resume_label
from .reads import attempts

#: The three values of ``HandoffCard.binding``.
RECOVERING, AWAITING, BOUND = "recovering", "awaiting decision", "bound"


def _s(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else v


def cards(ctx: Ctx, spec: SwarmSpec) -> list[HandoffCard]:
    w = ctx.w
    w.trip()
    handoffs = {_s(k): _s(v) for k, v in w.client.hgetall(w.keys.seat_handoffs).items()}
    seats = [s for s in spec.seats if s.name in handoffs]
    fenced, rows = attempts(w, [handoffs[s.name] for s in seats], [s.task.id for s in seats])
    successors = [a.decision.replacement for a in fenced.values() if a.decision and a.decision.replacement]
    after, _ = attempts(w, successors)
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
        elif not waiting_for_choice:  # fence steps still running: nothing to choose yet
            checkpoint_id, reason, label, available = None, fence.reason, None, False
        else:
            ckpt = ctx.checkpoint(
                fence.execution_id, record.task_id, record.task_generation, spec.compatibility_key
            )
            checkpoint_id = ckpt.checkpoint_id if ckpt else None
            reason = card_reason(fence, ckpt)
            label = resume_label(ckpt, fence)
            available = ckpt is not None
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
            )
        )
    return out
