"""Which attempts an incremental pass observes, and the Nodes it observes them against.

A full pass (the Pods listed in full: :mod:`.podcache`) observes every seat's
current attempt, as before. Between full passes a pass observes only the
attempts something may have changed for:

* its Pod changed (a watch event since the last pass), or it has no Pod in the
  cache (never appeared, or deleted: observed ``gone``);
* it was never observed by this process (a new attempt);
* its last verdict can change with time alone: ``pending`` (the image-pull
  grace runs out; a foreign Pod), ``failed`` or ``gone`` (its recovery may
  have failed and is retried);
* its Pod is bound to a Node that changed, vanished or is not Ready (node loss
  is a matter of time since the Node's Ready condition changed).

The seats map (seat → current attempt) is read every pass (one round trip of
short strings); the attempt records (JSON) only of the attempts chosen, in one
more round trip, skipped when none is. An attempt whose record is no longer
``admitted`` (fenced, relaunched) is remembered and never read again.

The Nodes are listed every ``every_s`` (a quarter of ``node_lost_after_s``,
at most 10 s), not every pass: node loss is still seen within
``node_lost_after_s`` plus that period.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import redis

from ..recovery.keys import SwarmKeys
from ..recovery.models import AttemptObservation
from ..recovery.records import AttemptRecord
from .pods import pod_name

#: Verdicts that no later Pod event is needed to change.
SETTLED = frozenset({"running", "succeeded"})


def _s(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else v


def node_period(node_lost_after_s: float) -> float:
    """How often the Nodes are listed between full passes."""
    return max(0.5, min(10.0, node_lost_after_s / 4))


def _readiness(node: Mapping[str, Any]) -> tuple[str, str]:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return str(cond.get("status")), str(cond.get("lastTransitionTime"))
    return "", ""


def touched_nodes(
    before: Mapping[str, Mapping[str, Any]] | None, after: Mapping[str, Mapping[str, Any]]
) -> set[str]:
    """Nodes that appeared, vanished or changed readiness between two lists, and those not Ready now."""
    old = {n: _readiness(v) for n, v in (before or {}).items()}
    new = {n: _readiness(v) for n, v in after.items()}
    changed = {n for n in old.keys() | new.keys() if old.get(n) != new.get(n)}
    return changed | {n for n, (status, _) in new.items() if status != "True"}


def bound_to(pods: Mapping[str, Mapping[str, Any]], nodes: Collection[str]) -> set[str]:
    """Names of the Pods bound to one of ``nodes``."""
    if not nodes:
        return set()
    return {name for name, p in pods.items() if str((p.get("spec") or {}).get("nodeName") or "") in nodes}


class Scope:
    """What this process last saw of each current attempt, to choose the ones a pass observes."""

    def __init__(self, client: redis.Redis, keys: SwarmKeys) -> None:
        self._client = client
        self._keys = keys
        #: execution id → state of its last observation (current, admitted attempts only).
        self.states: dict[str, str] = {}
        #: Attempts whose record is no longer admitted (never admitted again).
        self._out: set[str] = set()
        #: How many verdicts changed so far (the status is rebuilt when this moves).
        self.moves = 0

    def chosen(
        self,
        pods: Mapping[str, Any],
        changed: Collection[str],
        nodes_touched: Collection[str],
    ) -> list[AttemptRecord]:
        """The current admitted attempts this incremental pass observes, sorted by seat."""
        raw = self._client.hgetall(self._keys.seats)
        seats = {_s(k): _s(v) for k, v in raw.items()}
        current = set(seats.values())
        self._out &= current
        for gone in self.states.keys() - current:
            del self.states[gone]
            self.moves += 1
        near = bound_to(pods, nodes_touched)
        wanted = [
            eid for eid in seats.values() if eid not in self._out and self._wanted(eid, pods, changed, near)
        ]
        if not wanted:
            return []
        records = self._client.hmget(self._keys.attempt_records, wanted)
        out: list[AttemptRecord] = []
        for eid, blob in zip(wanted, records, strict=True):
            record = AttemptRecord.model_validate_json(blob) if blob else None
            if record is None or record.state != "admitted" or seats.get(record.seat) != eid:
                self._out.add(eid)
                if self.states.pop(eid, None) is not None:
                    self.moves += 1
                continue
            out.append(record)
        return sorted(out, key=lambda r: r.seat)

    def _wanted(self, eid: str, pods: Mapping[str, Any], changed: Collection[str], near: set[str]) -> bool:
        name = pod_name(eid)
        state = self.states.get(eid)
        return state not in SETTLED or name in changed or name not in pods or name in near

    def seen(self, observations: list[AttemptObservation], *, full: bool) -> None:
        """Remember the verdicts of this pass (a full pass replaces what was known)."""
        if full:
            self.states = {}
            self._out = set()
        for o in observations:
            if self.states.get(o.execution_id) != o.state:
                self.moves += 1
            self.states[o.execution_id] = o.state

    def running(self) -> int:
        return sum(1 for s in self.states.values() if s == "running")
