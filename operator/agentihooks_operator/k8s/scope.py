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

The seats map (seat → current attempt) costs one round trip per pass whose
reply is its version token alone while no seat changed, whatever the swarm's
size (:mod:`..recovery.store.seatsmap`); the map itself crosses only when it changed. The
attempt records (JSON) are read only for the attempts chosen, in one more
round trip, skipped when none is. An attempt whose record is no longer
``admitted`` (fenced, relaunched) is remembered and not read again. The pass
reads by name the Pods the cache lacks for the attempts chosen
(:mod:`.passreads`): the watch may not have delivered a Pod just created.

The Nodes are listed every ``every_s`` (a quarter of ``node_lost_after_s``,
at most 10 s), not every pass: node loss is still seen within
``node_lost_after_s`` plus that period.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import redis

from ..recovery.models import AttemptObservation
from ..recovery.store.keys import SwarmKeys
from ..recovery.store.records import AttemptRecord
from ..recovery.store.seatsmap import SeatsReader
from .building.pods import pod_name

#: Verdicts that no later Pod event is needed to change.
SETTLED = frozenset({"running", "succeeded"})


def node_period(node_lost_after_s: float) -> float:
    """How often the Nodes are listed between full passes."""
    return max(0.5, min(10.0, node_lost_after_s / 4))


def _readiness(node: Mapping[str, Any]) -> tuple[str, str]:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return str(cond.get("status")), str(cond.get("lastTransitionTime"))
    return "", ""


def not_ready(node: Mapping[str, Any]) -> bool:
    """The Node's Ready condition is not ``True`` (or it has none)."""
    return _readiness(node)[0] != "True"


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


def execution_of(name: str) -> str:
    """The execution id a Pod name carries (see :func:`.pods.pod_name`)."""
    return name.removeprefix(pod_name(""))


class Scope:
    """What this process last saw of each current attempt, to choose the ones a pass observes.

    Every set here is kept up to date from what changed (a Pod event, a new seats map, a verdict),
    so choosing costs O(changed + unsettled), not O(seats)."""

    def __init__(self, client: redis.Redis, keys: SwarmKeys) -> None:
        self._client = client
        self._keys = keys
        self._reader = SeatsReader(client, keys, "map")
        #: execution id → state of its last observation (current, admitted attempts only).
        self.states: dict[str, str] = {}
        self._running = 0
        #: Observed attempts whose verdict may change with time alone (see the module's doc).
        self._unsettled: set[str] = set()
        #: Attempts whose record is no longer admitted (never admitted again).
        self._out: set[str] = set()
        #: The seats map as last read (its version is the reader's), its attempts and those without
        #: a Pod in the cache.
        self._seats: dict[str, str] = {}
        self._current: set[str] = set()
        self._absent: set[str] = set()
        #: How many verdicts changed so far (the status is rebuilt when this moves).
        self.moves = 0

    def chosen(
        self,
        pods: Mapping[str, Any],
        changed: Collection[str],
        nodes_touched: Collection[str],
    ) -> list[AttemptRecord]:
        """The current admitted attempts this incremental pass observes, sorted by seat."""
        flat = self._reader.moved()
        wanted: set[str] = set()
        if flat is not None:  # the seats map changed since the last read
            self._seats = dict(zip(flat[0::2], flat[1::2], strict=True))
            self._current = set(self._seats.values())
            for gone in self.states.keys() - self._current:
                self._drop(gone)
            self._out &= self._current
            self._absent = {e for e in self._current if pod_name(e) not in pods}
            wanted |= self._current - self.states.keys()  # new attempts
        else:
            for name in changed:
                eid = execution_of(name)
                if eid in self._current:
                    (self._absent.discard if name in pods else self._absent.add)(eid)
        wanted |= self._absent | self._unsettled
        wanted |= {execution_of(n) for n in changed} & self._current
        if nodes_touched:
            wanted |= {execution_of(n) for n in bound_to(pods, nodes_touched)} & self._current
        ids = sorted(wanted - self._out)
        if not ids:
            return []
        records = self._client.hmget(self._keys.attempt_records, ids)
        out: list[AttemptRecord] = []
        for eid, blob in zip(ids, records, strict=True):
            record = AttemptRecord.model_validate_json(blob) if blob else None
            if record is None or record.state != "admitted" or self._seats.get(record.seat) != eid:
                self._out.add(eid)
                self._drop(eid)
                continue
            out.append(record)
        return sorted(out, key=lambda r: r.seat)

    def seen(self, observations: list[AttemptObservation], *, full: bool) -> None:
        """Remember the verdicts of this pass (a full pass replaces what was known)."""
        if full:  # the next incremental pass reads the seats map again
            self.states, self._running, self._unsettled, self._out = {}, 0, set(), set()
            self._reader.forget()
        for o in observations:
            if self.states.get(o.execution_id) != o.state:
                self.moves += 1
            self._drop(o.execution_id, count=False)
            self.states[o.execution_id] = o.state
            self._running += o.state == "running"
            if o.state not in SETTLED:
                self._unsettled.add(o.execution_id)

    def _drop(self, eid: str, *, count: bool = True) -> None:
        state = self.states.pop(eid, None)
        if state is None:
            return
        self._running -= state == "running"
        self._unsettled.discard(eid)
        self.moves += count

    def running(self) -> int:
        """Current attempts last seen running."""
        return self._running
