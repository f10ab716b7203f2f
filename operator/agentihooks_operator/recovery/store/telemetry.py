"""Reading the swarm's counters and its bounded event stream (both written only by Lua scripts).

Counters are ``<family>:<label>`` fields of one hash: ``fences_by_reason``,
``releases``, ``decisions_by_choice``, ``decisions_by_decider``,
``admissions``, ``refusals_by_reason``, ``restore_outcomes_by_type``,
``ledger_restores``. Labels are fixed words, never names or ids.
"""

from __future__ import annotations

from agentihooks_checkpoint.directive import Continuity

from ..models import RecoveryEvent
from .writer import Writer


def _s(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else v


def metrics(w: Writer) -> dict[str, int]:
    w.trip()
    raw = w.client.hgetall(w.keys.recovery_metrics)
    return {_s(k): int(v) for k, v in raw.items()}


def outcomes_by_type(w: Writer) -> dict[str, int]:
    fields = [f"restore_outcomes_by_type:{c.value}" for c in Continuity]
    w.trip()
    values = w.client.hmget(w.keys.recovery_metrics, fields)
    return {c.value: int(v or 0) for c, v in zip(Continuity, values, strict=True)}


def family(counters: dict[str, int], name: str) -> dict[str, int]:
    """The labels and values of one counter family."""
    prefix = name + ":"
    return {k[len(prefix) :]: v for k, v in counters.items() if k.startswith(prefix)}


def events(w: Writer, count: int = 100) -> list[RecoveryEvent]:
    if count < 1:
        raise ValueError("count must be positive")
    w.trip()
    entries = w.client.xrevrange(w.keys.recovery_events, count=count) or []
    out = []
    for eid, fields in reversed(entries):
        if eid is None or fields is None:
            continue
        f = {_s(k): _s(v) for k, v in fields.items()}
        out.append(
            RecoveryEvent(
                id=_s(eid),
                type=f["type"],  # type: ignore[arg-type,unused-ignore]
                execution_id=f["execution_id"],
                seat=f["seat"],
                expected_generation=int(f["expected_generation"]) if f["expected_generation"] else None,
                observed_generation=int(f["observed_generation"]) if f["observed_generation"] else None,
                epoch=int(f["epoch"]),
                detail=f.get("detail", ""),
                at_ms=int(f["at_ms"]),
                parent_call=f.get("parent_call") or None,
                path=f.get("path") or None,
                resumed=(f["resumed"] == "1") if "resumed" in f else None,
                observed=f.get("observed") or None,
                sent={"1": True, "0": False}.get(f.get("sent", "")),
            )
        )
    return out
