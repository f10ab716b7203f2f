"""The event-driven path's two decisions, without a cluster: which Pod events it takes, and who acts.

``failed_attempt`` reads only the Pod: it takes failures the Pod alone shows
(OOM kill, eviction, a failed exit) and leaves to the periodic pass what needs
more (a lost node, an image pull within its grace, a foreign or deleted Pod).
``Pipeline.offer`` starts nothing for a replica that does not hold the swarm's
lease. The runner here is a stand-in at the edge (only ``recovery.epoch`` and
``owner`` are read before anything is submitted).
"""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest
from agentihooks_operator.k8s.building.pods import label, owner_value
from agentihooks_operator.k8s.pipeline import Lane, Pipeline, failed_attempt
from testsupport import kubelet as k

EID = "exe-" + "a" * 32


def ours(status: dict[str, Any], *, swarm: str = "example", **extra: Any) -> dict[str, Any]:
    pod = k.pod(status, **extra)
    pod["metadata"]["name"] = f"swarm-{EID}"
    pod["metadata"]["labels"] = {
        label("swarm"): swarm,
        label("controller-owner"): owner_value(swarm),
        label("execution-id"): EID,
        label("generation"): "3",
    }
    pod["metadata"]["annotations"] = {label("seat"): "eng-1"}
    return pod


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (k.oom_killed(), "oom_killed"),
        (k.evicted(), "evicted"),
        (k.terminated(2, "Error"), "application_exit"),
    ],
    ids=["oom", "evicted", "exit"],
)
def test_a_failure_the_pod_shows_is_taken(status: dict[str, Any], reason: str) -> None:
    seen = failed_attempt(ours(status), "example")
    assert seen is not None
    assert (seen.execution_id, seen.seat, seen.generation, seen.state, seen.reason) == (
        EID,
        "eng-1",
        3,
        "failed",
        reason,
    )
    assert seen.superseded_legacy is False


def test_the_legacy_mark_is_carried() -> None:
    pod = ours(k.oom_killed())
    pod["metadata"]["annotations"][label("superseded")] = "legacy-specification"
    seen = failed_attempt(pod, "example")
    assert seen is not None and seen.superseded_legacy is True


@pytest.mark.parametrize(
    "pod",
    [
        ours(k.running()),
        ours(k.pending(), node_name=None),
        ours(k.oom_killed(), deleting=True),  # being deleted: the pass decides (node loss or retire)
        ours(k.oom_killed(), swarm="other"),  # another swarm's owner value: foreign here
        {**k.pod(k.oom_killed())},  # no labels at all
        ours(k.disruption("DeletionByPodGC")),  # its Node was deleted: the pass says node_lost
    ],
    ids=["running", "pending", "deleting", "foreign", "unlabelled", "pod-gc"],
)
def test_everything_else_is_left_to_the_pass(pod: dict[str, Any]) -> None:
    assert failed_attempt(pod, "example") is None


def _lane(epoch: int, woken: threading.Event) -> Lane:
    runner = SimpleNamespace(recovery=SimpleNamespace(epoch=epoch), owner=SimpleNamespace(name="example"))
    return Lane(runner=runner, spec=lambda: None, wake=woken.set, stopping=lambda: False)  # type: ignore[arg-type]


def test_a_replica_without_the_lease_does_nothing() -> None:
    pipeline = Pipeline(workers=1)
    woken = threading.Event()
    try:
        pipeline.register(("ns", "example"), _lane(0, woken))
        assert pipeline.offer(("ns", "example"), ours(k.oom_killed())) is False
        assert pipeline.offer(("ns", "unknown-swarm"), ours(k.oom_killed(), swarm="unknown-swarm")) is False
    finally:
        pipeline.close()
    assert not woken.is_set() and pipeline.recovered == 0


def test_a_healthy_pod_is_not_taken_even_by_the_holder() -> None:
    pipeline = Pipeline(workers=1)
    woken = threading.Event()
    try:
        pipeline.register(("ns", "example"), _lane(4, woken))
        assert pipeline.offer(("ns", "example"), ours(k.running())) is False
    finally:
        pipeline.close()
    assert not woken.is_set()


def test_the_daemon_is_woken_once_when_the_last_recovery_of_a_swarm_ends() -> None:
    release = threading.Event()
    started: list[str] = []

    def recover_one(spec: object, observation: Any) -> None:
        started.append(observation.execution_id)
        release.wait(10)

    recovery = SimpleNamespace(epoch=2, recover_one=recover_one)
    runner = SimpleNamespace(recovery=recovery, owner=SimpleNamespace(name="example"), keepalive=lambda: None)
    wakes: list[int] = []
    lane = Lane(runner=runner, spec=lambda: None, wake=lambda: wakes.append(1), stopping=lambda: False)  # type: ignore[arg-type]
    pipeline = Pipeline(workers=2)
    try:
        pipeline.register(("ns", "example"), lane)
        other = ours(k.evicted())
        other["metadata"]["labels"][label("execution-id")] = "exe-" + "b" * 32
        other["metadata"]["annotations"][label("seat")] = "eng-2"
        assert pipeline.offer(("ns", "example"), ours(k.oom_killed())) is True
        assert pipeline.offer(("ns", "example"), other) is True
        assert pipeline.defer(("ns", "example")) is True, "a replacement's event waits for the wake"
        assert pipeline.defer(("ns", "elsewhere")) is False
        release.set()
    finally:
        pipeline.close()
    assert sorted(started) == sorted([EID, "exe-" + "b" * 32])
    assert wakes == [1] and pipeline.defer(("ns", "example")) is False
