"""What the ledger page shows, as one JSON document: task rows, handoff cards, the pause switch, the caller.

Built from the recovery core's records in two Redis round trips for the rows
(seat → current attempt, then attempts and ledger rows) plus the core's own
card reader. Nothing here writes.
"""

from __future__ import annotations

from typing import Any

from ..api.access.auth import Caller
from ..api.registry import SwarmEntry
from ..api.state import ApiState
from ..recovery.store.records import RECOVERY_PENDING, AttemptRecord, LedgerRow


def _s(v: bytes | str | None) -> str | None:
    return v.decode() if isinstance(v, bytes) else v


def ledger_rows(state: ApiState, entry: SwarmEntry) -> list[dict[str, Any]]:
    """One row per seat's task: text, seat, generation (of the current attempt) and ``awaiting``."""
    keys = entry.recovery.keys
    seats = entry.spec.seats
    current_ids = [_s(v) for v in state.redis.hmget(keys.seats, [s.name for s in seats])]
    ids = [i for i in current_ids if i]
    records: dict[str, AttemptRecord] = {}
    if ids:
        for raw in state.redis.hmget(keys.attempt_records, ids):
            if raw:
                attempt = AttemptRecord.model_validate_json(raw)
                records[attempt.execution_id] = attempt
    task_ids = []
    for seat, eid in zip(seats, current_ids, strict=True):
        known = records.get(eid) if eid else None
        task_ids.append(known.task_id if known else seat.task.id)
    rows = {}
    for tid, raw in zip(task_ids, state.redis.hmget(keys.ledger_tasks, task_ids), strict=True):
        if raw:
            rows[tid] = LedgerRow.model_validate_json(raw)
    out = []
    for seat, eid, tid in zip(seats, current_ids, task_ids, strict=True):
        rec = records.get(eid) if eid else None
        row = rows.get(tid)
        awaiting = row.awaiting if row else None
        out.append(
            {
                "task_id": tid,
                "seat": seat.name,
                "text": row.text if row else (rec.task_text if rec else seat.task.text),
                "generation": rec.generation if rec else None,
                "task_generation": row.task_generation if row else (rec.task_generation if rec else None),
                "execution_id": eid,
                "awaiting": awaiting,
                "recovery_pending": awaiting == RECOVERY_PENDING,
            }
        )
    return out


def ledger_view(state: ApiState, entry: SwarmEntry, caller: Caller) -> dict[str, Any]:
    """The whole page's data for ``caller`` (blocking: reads Redis and the checkpoint catalog)."""
    cards = []
    for card in entry.recovery.cards(entry.spec):
        data = card.model_dump(mode="json")
        data["awaiting_decision"] = card.binding == "awaiting decision"
        data["recovering"] = card.binding == "recovering"
        cards.append(data)
    return {
        "swarm": entry.name,
        "caller": {"kind": caller.kind, "agent": caller.agent},
        "paused": entry.recovery.paused(),
        "automation": entry.spec.recovery.automation,
        "lease_held": state.lease_held(entry),
        "rows": ledger_rows(state, entry),
        "cards": cards,
    }
