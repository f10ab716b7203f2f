"""Which attempts an incremental pass observes (k8s/scope.py), on a real redis-server.

The seats map and the attempt records are the recovery core's own (admitted
by ``Recovery.ensure_seats``); the Pods are plain documents, as the watch
would have delivered them.
"""

from __future__ import annotations

from typing import Any

import redis
from agentihooks_checkpoint.catalog import EmptyCatalog
from agentihooks_operator.k8s.building.pods import pod_name
from agentihooks_operator.k8s.scope import Scope
from agentihooks_operator.recovery import AttemptObservation, Recovery
from agentihooks_operator.swarm import SwarmSpec


class NoLaunch:
    def launch(self, plan: Any) -> str:
        return "created"

    def exists(self, execution_id: str) -> bool:
        return True

    def retire(self, execution_id: str) -> None:
        return None


def spec(seats: int) -> SwarmSpec:
    return SwarmSpec.model_validate(
        {
            "image": "registry.example/worker:v1",
            "harness": {"name": "claude", "command": ["claude"]},
            "seats": [
                {"name": f"s-{i}", "project": "local:t", "task": {"id": f"t-{i}", "text": "x"}}
                for i in range(seats)
            ],
        }
    )


def pod(eid: str, node: str = "n1") -> dict[str, Any]:
    return {"metadata": {"name": pod_name(eid)}, "spec": {"nodeName": node}, "status": {"phase": "Running"}}


def seen(scope: Scope, eids: list[str], state: str = "running") -> None:
    scope.seen(
        [AttemptObservation(execution_id=e, seat="s", generation=1, state=state) for e in eids],  # type: ignore[arg-type]
        full=False,
    )


def ids(records: list[Any]) -> set[str]:
    return {r.execution_id for r in records}


def test_a_quiet_pass_observes_nothing_and_a_changed_one_only_what_changed(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    r = Recovery(client, "scope", holder="t", catalog=EmptyCatalog(), launcher=NoLaunch())  # type: ignore[arg-type]
    assert r.acquire()
    eids = [p.execution_id for p in r.ensure_seats(spec(4))]
    pods = {pod_name(e): pod(e, node="n2" if e == eids[3] else "n1") for e in eids}
    scope = Scope(client, r.keys)

    assert ids(scope.chosen(pods, set(), set())) == set(eids), "never observed: all of them"
    seen(scope, eids)
    assert scope.running() == 4
    assert scope.chosen(pods, set(), set()) == [], "nothing changed: nothing to observe"

    assert ids(scope.chosen(pods, {pod_name(eids[0])}, set())) == {eids[0]}, "a Pod event"
    gone = {n: p for n, p in pods.items() if n != pod_name(eids[1])}
    assert ids(scope.chosen(gone, {pod_name(eids[1])}, set())) == {eids[1]}, "its Pod was deleted"
    assert ids(scope.chosen(gone, set(), set())) == {eids[1]}, "still absent: observed every pass"
    assert ids(scope.chosen(pods, {pod_name(eids[1])}, set())) == {eids[1]}
    assert scope.chosen(pods, set(), set()) == [], "back: settled again"

    seen(scope, [eids[2]], "pending")
    assert scope.running() == 3
    assert ids(scope.chosen(pods, set(), set())) == {eids[2]}, "pending can change with time alone"
    assert ids(scope.chosen(pods, set(), {"n2"})) == {eids[2], eids[3]}, "a Pod on a touched Node"

    more = [p.execution_id for p in r.ensure_seats(spec(5))]
    assert len(more) == 1
    pods[pod_name(more[0])] = pod(more[0])
    assert ids(scope.chosen(pods, set(), set())) == {eids[2], more[0]}, "a new seat's attempt"
    client.close()


def test_a_full_pass_starts_the_scope_again(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    r = Recovery(client, "scope", holder="t", catalog=EmptyCatalog(), launcher=NoLaunch())  # type: ignore[arg-type]
    assert r.acquire()
    eids = [p.execution_id for p in r.ensure_seats(spec(2))]
    pods = {pod_name(e): pod(e) for e in eids}
    scope = Scope(client, r.keys)
    scope.seen(
        [AttemptObservation(execution_id=e, seat="s", generation=1, state="running") for e in eids], full=True
    )
    assert scope.running() == 2
    assert scope.chosen(pods, set(), set()) == []
    scope.seen([AttemptObservation(execution_id=eids[0], seat="s", generation=1, state="running")], full=True)
    assert scope.running() == 1, "a full pass replaces what was known"
    assert ids(scope.chosen(pods, set(), set())) == {eids[1]}
    client.close()
