"""Pure edges of the operator: spec errors name every wrong field, Events, observations, API paths."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agentihooks_operator.k8s.client import path_for
from agentihooks_operator.k8s.errors import InvalidSwarm
from agentihooks_operator.k8s.events import Notice, events_for, notice_of_telemetry
from agentihooks_operator.k8s.handlers import parse_spec
from agentihooks_operator.k8s.observing.observe import observe
from agentihooks_operator.recovery.store.records import AttemptRecord
from testsupport import kubelet as kl

GOOD: dict[str, Any] = {
    "image": "ghcr.io/agentihooks/worker:2.1.0",
    "harness": {"name": "codex", "command": ["codex", "exec"]},
    "seats": [{"name": "eng-1", "project": "github.com/acme/app", "task": {"id": "t-1", "text": "x"}}],
}


@pytest.mark.parametrize(
    ("patch", "named"),
    [
        ({"harness": {"name": "gemini", "command": ["x"]}}, "harness.name"),
        ({"harness": {"name": "claude", "command": []}}, "harness.command"),
        ({"seats": []}, "seats"),
        ({"seats": [{**GOOD["seats"][0], "name": "Eng_1"}]}, "seats.0.name"),
        ({"seats": [{**GOOD["seats"][0], "project": "gitlab.com/a/b"}]}, "seats.0.project"),
        ({"seats": [GOOD["seats"][0], GOOD["seats"][0]]}, "seat names must be unique"),
        ({"recovery": {"passIntervalSeconds": 0}}, "recovery.passIntervalSeconds"),
        ({"recovery": {"imagePullGraceSeconds": 99999}}, "recovery.imagePullGraceSeconds"),
        ({"checkpointStore": {"root": "relative/dir"}}, "absolute"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_invalid_spec_names_the_field(patch: dict[str, Any], named: str) -> None:
    with pytest.raises(InvalidSwarm, match="invalid Swarm spec") as err:
        parse_spec({**GOOD, **patch})
    assert named in str(err.value)


def test_valid_spec_parses() -> None:
    spec = parse_spec(GOOD)
    assert spec.harness.name == "codex" and spec.recovery.image_pull_grace_seconds == 120


def test_events_on_swarm_and_pod_carry_no_secrets() -> None:
    notice = notice_of_telemetry("fence", "exe-1", "eng-1", "oom_killed", 4)
    events = events_for(notice, swarm="example", namespace="team-a", swarm_uid="u-1")
    assert [e["involvedObject"]["kind"] for e in events] == ["Swarm", "Pod"]
    assert events[1]["involvedObject"]["name"] == "swarm-exe-1"
    assert all(e["metadata"]["namespace"] == "team-a" and e["reason"] == "Fenced" for e in events)
    assert events[0]["type"] == "Warning"
    assert events[0]["metadata"]["name"] != events[1]["metadata"]["name"]
    only_swarm = events_for(Notice("RequestRefused", "refused"), swarm="s", namespace="n", swarm_uid=None)
    assert len(only_swarm) == 1 and "uid" not in only_swarm[0]["involvedObject"]
    assert "token" not in json.dumps(events).lower()


def test_api_paths() -> None:
    assert path_for("pods", "ns", "p", "status") == "/api/v1/namespaces/ns/pods/p/status"
    assert path_for("nodes", None) == "/api/v1/nodes"
    assert (
        path_for("agentihooks.io/v1alpha1/swarms", "ns", "s")
        == "/apis/agentihooks.io/v1alpha1/namespaces/ns/swarms/s"
    )


class _Grace:
    """Stands in for the Redis-kept first-seen times (unit level only)."""

    def __init__(self, first: dict[str, int]) -> None:
        self.first = first
        self.calls: list[tuple[list[str], list[str]]] = []

    def first_seen(self, failing: Any, clear: Any) -> dict[str, int]:
        failing, clear = list(failing), list(clear)
        self.calls.append((failing, clear))
        return {e: self.first[e] for e in failing if e in self.first}

    noted: dict[str, str]

    def stops(self, stopping: Any, ended: Any, gone: Any) -> dict[str, str]:
        self.noted = getattr(self, "noted", {})
        for eid, reason in stopping.items():
            self.noted.setdefault(eid, reason)
        for eid in ended:
            self.noted.pop(eid, None)
        return {e: self.noted[e] for e in gone if e in self.noted}


def _attempt(eid: str, seat: str) -> AttemptRecord:
    return AttemptRecord(
        execution_id=eid,
        seat=seat,
        generation=1,
        task_id="t",
        task_generation=1,
        grant_id="g",
        compatibility_key="k",
        task_text="x",
        admitted_at_ms=0,
        epoch=1,
    )


def test_observe_maps_pods_to_observations_and_applies_the_grace() -> None:
    attempts = [
        _attempt("exe-a", "a"),
        _attempt("exe-b", "b"),
        _attempt("exe-c", "c"),
        _attempt("exe-d", "d"),
    ]
    pods = {
        "swarm-exe-a": kl.pod(kl.running()),
        "swarm-exe-b": kl.pod(kl.pull_failure()),
        "swarm-exe-c": kl.pod(kl.pull_failure()),
    }
    grace = _Grace({"exe-b": 0, "exe-c": 100_000})
    nodes = {"kind-worker": kl.node("kind-worker")}
    out = observe(attempts, pods, nodes, grace=grace, grace_ms=120_000, node_lost_after_s=40, now_ms=120_000)  # type: ignore[arg-type]
    got = {o.execution_id: (o.state, o.reason) for o in out}
    assert got == {
        "exe-a": ("running", None),
        "exe-b": ("failed", "image_pull"),
        "exe-c": ("pending", None),
        "exe-d": ("gone", None),
    }
    assert grace.calls == [(["exe-b", "exe-c"], ["exe-a", "exe-d"])]


def test_a_drained_attempt_is_held_then_fenced_with_the_reason_its_pod_showed() -> None:
    """Evicted and still running: ``stopping``; its Pod deleted before a pass saw it end: ``gone``,
    fenced ``evicted`` (noted while it was held), not ``node_lost``."""
    attempts = [_attempt("exe-a", "a")]
    nodes = {"kind-worker": kl.node("kind-worker")}
    grace = _Grace({})
    marked = {"swarm-exe-a": kl.pod(kl.disruption("EvictionByEvictionAPI"), deleting=True)}
    now_ms = int(kl.NOW.timestamp() * 1000)
    kw: Any = {"grace": grace, "grace_ms": 0, "node_lost_after_s": 40, "now_ms": now_ms}
    [held] = observe(attempts, marked, nodes, **kw)
    assert (held.state, held.reason) == ("stopping", "evicted")
    [gone] = observe(attempts, {}, nodes, **kw)
    assert (gone.state, gone.reason) == ("gone", "evicted")
    [unheld] = observe([_attempt("exe-b", "b")], {}, nodes, **kw)
    assert (unheld.state, unheld.reason) == ("gone", None)
