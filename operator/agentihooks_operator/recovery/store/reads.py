"""Batched reads: a pass reads the whole swarm's small state in one pipeline, then details in one more.

Nothing here writes. Round trips are counted on the :class:`~.writer.Writer`
so a pass can report them and the benchmark can check they stay constant.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .records import (
    AttemptRecord,
    DecisionRecord,
    FenceRecord,
    Heartbeat,
    JournalEntry,
    LedgerRow,
    RecoveryRequest,
    RefusalRecord,
    StoredOutcome,
)
from .writer import Writer

#: Reads each seat's current attempt record in one round trip (the seats map, then those records).
#: ``unpack`` is bounded by Lua's C stack (about 8,000 values), so the records are read 4,000 at a time:
#: a swarm of 50,000 seats is one round trip too.
CURRENT_ATTEMPTS_LUA = """
local seats = redis.call('HVALS', KEYS[1])
local out = {}
for i = 1, #seats, 4000 do
  local part = redis.call('HMGET', KEYS[2], unpack(seats, i, math.min(i + 3999, #seats)))
  for _, v in ipairs(part) do out[#out + 1] = v end
end
return out
"""


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


@dataclass
class Snapshot:
    #: The current attempt of each seat the pass asked about (those it observed failing), not of all:
    #: a quiet pass of 50,000 seats reads none of them.
    seats: dict[str, str]
    work: dict[str, str]
    paused: bool
    requests: dict[str, RecoveryRequest]
    #: Attempts whose worker reported a refused restore (never fenced for exiting after it).
    refused: frozenset[str] = frozenset()


@dataclass
class Attempt:
    """Everything stored about one attempt."""

    execution_id: str
    record: AttemptRecord | None = None
    fence: FenceRecord | None = None
    decision: DecisionRecord | None = None
    heartbeat: Heartbeat | None = None
    outcome: StoredOutcome | None = None
    journal: dict[str, JournalEntry] = field(default_factory=dict)
    refusal: RefusalRecord | None = None

    def step(self, name: str) -> str | None:
        entry = self.journal.get(name)
        return entry.status if entry else None


def snapshot(w: Writer, seats: Iterable[str] = ()) -> Snapshot:
    """The swarm's small state, and the current attempt of each of ``seats``, in one round trip."""
    k = w.keys
    asked = list(dict.fromkeys(seats))
    pipe = w.client.pipeline(transaction=False)
    if asked:
        pipe.hmget(k.seats, asked)
    pipe.hgetall(k.recovery_work)
    pipe.exists(k.recovery_paused)
    pipe.hgetall(k.recovery_requests)
    pipe.hkeys(k.restore_refusals)
    answers = pipe.execute()
    w.trip()
    current = answers.pop(0) if asked else []
    work, paused, requests, refused = answers
    return Snapshot(
        seats={seat: _s(eid) for seat, eid in zip(asked, current, strict=True) if eid is not None},
        work={_s(a): _s(b) for a, b in work.items()},
        paused=bool(paused),
        requests={_s(a): RecoveryRequest.model_validate_json(b) for a, b in requests.items()},
        refused=frozenset(_s(r) for r in refused),
    )


def attempts(
    w: Writer, ids: Iterable[str], task_ids: Iterable[str] = ()
) -> tuple[dict[str, Attempt], dict[str, LedgerRow]]:
    """Every record of ``ids`` and the ledger rows of ``task_ids``, in one round trip."""
    ids = list(dict.fromkeys(ids))
    tasks = list(dict.fromkeys(task_ids))
    if not ids and not tasks:
        return {}, {}
    k = w.keys
    pipe = w.client.pipeline(transaction=False)
    parts = [
        k.attempt_records,
        k.attempt_fences,
        k.attempt_recoveries,
        k.heartbeats,
        k.restore_outcomes,
        k.attempt_journal,
        k.restore_refusals,
    ]
    for part in parts:
        if ids:
            pipe.hmget(part, ids)
    if tasks:
        pipe.hmget(k.ledger_tasks, tasks)
    answers = pipe.execute()
    w.trip()
    out = {i: Attempt(i) for i in ids}
    if ids:
        recs, fences, decisions, beats, outcomes, journals, refusals = answers[:7]
        for n, i in enumerate(ids):
            a = out[i]
            a.record = AttemptRecord.model_validate_json(recs[n]) if recs[n] else None
            a.fence = FenceRecord.model_validate_json(fences[n]) if fences[n] else None
            a.decision = DecisionRecord.model_validate_json(decisions[n]) if decisions[n] else None
            a.heartbeat = Heartbeat.model_validate_json(beats[n]) if beats[n] else None
            a.outcome = StoredOutcome.model_validate_json(outcomes[n]) if outcomes[n] else None
            if journals[n]:
                a.journal = {s: JournalEntry.model_validate(e) for s, e in json.loads(journals[n]).items()}
            a.refusal = RefusalRecord.model_validate_json(refusals[n]) if refusals[n] else None
    rows: dict[str, LedgerRow] = {}
    if tasks:
        for t, raw in zip(tasks, answers[-1], strict=True):
            if raw:
                rows[t] = LedgerRow.model_validate_json(raw)
    return out, rows


def one(w: Writer, execution_id: str, task_id: str | None = None) -> tuple[Attempt, LedgerRow | None]:
    found, rows = attempts(w, [execution_id], [task_id] if task_id else [])
    return found[execution_id], rows.get(task_id) if task_id else None


def current_attempts(w: Writer) -> list[AttemptRecord]:
    """Each seat's current attempt while it is still admitted (not fenced), by seat; one round trip."""
    script = w.client.register_script(CURRENT_ATTEMPTS_LUA)
    try:
        raw = script(keys=[w.keys.seats, w.keys.attempt_records])
    finally:
        w.trip()
    out = [AttemptRecord.model_validate_json(v) for v in raw or [] if v]
    return sorted((r for r in out if r.state == "admitted"), key=lambda r: r.seat)
