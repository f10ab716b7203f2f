"""Table-driven classification of realistic Pod status documents, with the original's precedence."""

from __future__ import annotations

from datetime import timedelta

import pytest
from agentihooks_operator.k8s.observing.classify import Verdict, apply_pull_grace, classify
from agentihooks_operator.k8s.observing.drain import STOP_SLACK_S
from testsupport import kubelet as k
from testsupport.kubelet import NOW

READY_NODE = k.node("kind-worker")
NOT_READY_LONG = k.node("kind-worker", ready="Unknown", since=NOW - timedelta(minutes=5))
NOT_READY_SHORT = k.node("kind-worker", ready="False", since=NOW - timedelta(seconds=5))

CASES = [
    ("pending", k.pod(k.pending(), node_name=None), None, False, Verdict("pending")),
    ("running", k.pod(k.running()), READY_NODE, True, Verdict("running")),
    ("succeeded", k.pod(k.succeeded()), READY_NODE, True, Verdict("succeeded")),
    ("oom 137", k.pod(k.oom_killed()), READY_NODE, True, Verdict("failed", "oom_killed")),
    (
        "oom exit 0 phase Succeeded",
        k.pod(k.oom_killed(exit_code=0, phase="Succeeded")),
        READY_NODE,
        True,
        Verdict("failed", "oom_killed"),
    ),
    (
        "oom in init container",
        k.pod(k.oom_killed(init=True)),
        READY_NODE,
        True,
        Verdict("failed", "oom_killed"),
    ),
    ("evicted", k.pod(k.evicted()), READY_NODE, True, Verdict("failed", "evicted")),
    (
        "eviction API",
        k.pod(k.disruption("EvictionByEvictionAPI"), deleting=True),
        READY_NODE,
        True,
        Verdict("stopping", "evicted"),
    ),
    (
        "preempted",
        k.pod(k.disruption("PreemptionByScheduler")),
        READY_NODE,
        True,
        Verdict("stopping", "evicted"),
    ),
    (
        "kubelet termination",
        k.pod(k.disruption("TerminationByKubelet")),
        None,
        False,
        Verdict("stopping", "evicted"),
    ),
    (
        "pod GC of a deleted node",  # kube-controller-manager marks an orphaned Pod before deleting it
        k.pod(k.disruption("DeletionByPodGC"), deleting=True),
        None,
        False,
        Verdict("failed", "node_lost"),
    ),
    (
        "taint manager",
        k.pod(k.disruption("DeletionByTaintManager"), deleting=True),
        READY_NODE,
        True,
        Verdict("failed", "node_lost"),
    ),
    ("NodeLost", k.pod(k.node_lost_status(), deleting=True), None, False, Verdict("failed", "node_lost")),
    (
        "NodeNotReady condition",
        k.pod(k.node_not_ready_condition()),
        None,
        False,
        Verdict("failed", "node_lost"),
    ),
    ("node gone", k.pod(k.running()), None, True, Verdict("failed", "node_lost")),
    ("node unknown (cannot list)", k.pod(k.running()), None, False, Verdict("running")),
    ("node NotReady past bound", k.pod(k.running()), NOT_READY_LONG, True, Verdict("failed", "node_lost")),
    ("node NotReady within bound", k.pod(k.running()), NOT_READY_SHORT, True, Verdict("running")),
    ("ErrImagePull", k.pod(k.pull_failure()), READY_NODE, True, Verdict("pending", pull_failure=True)),
    (
        "ImagePullBackOff",
        k.pod(k.pull_failure("ImagePullBackOff")),
        READY_NODE,
        True,
        Verdict("pending", pull_failure=True),
    ),
    (
        "InvalidImageName",
        k.pod(k.pull_failure("InvalidImageName")),
        READY_NODE,
        True,
        Verdict("pending", pull_failure=True),
    ),
    ("non-zero exit", k.pod(k.application_exit(70)), READY_NODE, True, Verdict("failed", "application_exit")),
    ("exit 1", k.pod(k.application_exit(1)), READY_NODE, True, Verdict("failed", "application_exit")),
    ("deleted", None, None, True, Verdict("gone")),
    (  # its containers had ended: nothing left to wait for
        "eviction API, container ended",
        k.pod(k.drained(143), deleting=True),
        READY_NODE,
        True,
        Verdict("failed", "evicted"),
    ),
    (  # nobody is left to stop its containers: fenced at once
        "eviction API, node lost",
        k.pod(k.disruption("EvictionByEvictionAPI"), deleting=True),
        NOT_READY_LONG,
        True,
        Verdict("failed", "evicted"),
    ),
    ("kubectl delete", k.pod(k.running(), deleting=True), READY_NODE, True, Verdict("stopping", "node_lost")),
]


@pytest.mark.parametrize(
    ("pod", "node", "known", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_classify(pod: dict | None, node: dict | None, known: bool, expected: Verdict) -> None:
    assert classify(pod, node=node, node_known=known, now=NOW, node_lost_after_s=40) == expected


@pytest.mark.parametrize("reason", ["EvictionByEvictionAPI", "PreemptionByScheduler", "TerminationByKubelet"])
def test_a_planned_stop_is_held_until_its_deadline_and_the_slack(reason: str) -> None:
    """Deleting: the deadline is the deletionTimestamp; marked only: the mark plus the Pod's grace."""
    deleting = k.pod(k.disruption(reason), deleting=True)
    deleting["metadata"]["deletionTimestamp"] = k.ts(NOW + timedelta(seconds=60))
    marked = k.pod(k.disruption(reason))
    marked["spec"]["terminationGracePeriodSeconds"] = 60
    for pod in (deleting, marked):
        for after, state in (
            (0, "stopping"),
            (60 + STOP_SLACK_S - 1, "stopping"),
            (60 + STOP_SLACK_S, "failed"),
        ):
            verdict = classify(pod, node=READY_NODE, node_known=True, now=NOW + timedelta(seconds=after))
            assert verdict == Verdict(state, "evicted"), (after, pod["metadata"])  # type: ignore[arg-type]


def test_a_marked_pod_without_a_grace_gets_kubernetes_default() -> None:
    pod = k.pod(k.disruption("EvictionByEvictionAPI"))
    assert classify(pod, now=NOW + timedelta(seconds=30 + STOP_SLACK_S - 1)).state == "stopping"
    assert classify(pod, now=NOW + timedelta(seconds=30 + STOP_SLACK_S)).state == "failed"


def test_a_deleted_pod_whose_container_never_ran_is_not_held() -> None:
    pod = k.pod(k.pending(), deleting=True)
    pod["status"]["containerStatuses"] = [
        {"name": "worker", "state": {"waiting": {"reason": "ContainerCreating"}}}
    ]
    assert classify(pod, node=READY_NODE, node_known=True, now=NOW) == Verdict("failed", "node_lost")


def test_oom_wins_over_eviction_and_node_loss() -> None:
    status = k.oom_killed()
    status["reason"] = "NodeLost"
    assert classify(k.pod(status), now=NOW).reason == "oom_killed"
    status["reason"] = "Evicted"
    assert classify(k.pod(status), now=NOW).reason == "oom_killed"


def test_eviction_wins_over_node_loss() -> None:
    status = k.evicted()
    status["conditions"] = [{"type": "Ready", "status": "False", "reason": "NodeNotReady"}]
    assert classify(k.pod(status), now=NOW).reason == "evicted"


def test_node_loss_wins_over_pull_failure_and_exit() -> None:
    status = k.pull_failure()
    status["reason"] = "NodeLost"
    assert classify(k.pod(status), now=NOW) == Verdict("failed", "node_lost")


def test_pull_failure_is_held_before_application_exit() -> None:
    status = k.pull_failure()
    status["phase"] = "Failed"
    assert classify(k.pod(status), now=NOW) == Verdict("pending", pull_failure=True)


def test_pull_grace() -> None:
    waiting = Verdict("pending", pull_failure=True)
    assert apply_pull_grace(waiting, first_seen_ms=1000, now_ms=1000 + 119_999, grace_ms=120_000) == waiting
    assert apply_pull_grace(waiting, first_seen_ms=1000, now_ms=1000 + 120_000, grace_ms=120_000) == Verdict(
        "failed", "image_pull", pull_failure=True
    )
    assert apply_pull_grace(waiting, first_seen_ms=None, now_ms=10**9, grace_ms=0) == waiting
    running = Verdict("running")
    assert apply_pull_grace(running, first_seen_ms=0, now_ms=10**9, grace_ms=0) == running


def test_empty_status_is_pending() -> None:
    assert classify({"metadata": {"name": "x"}}, now=NOW) == Verdict("pending")


def _deleted(status: dict, *, asked: timedelta, grace: int = 30) -> dict:
    """A Pod whose deletion was asked for ``asked`` after NOW, with ``grace`` seconds to stop."""
    pod = k.pod(status)
    pod["metadata"]["deletionTimestamp"] = (NOW + asked + timedelta(seconds=grace)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    pod["metadata"]["deletionGracePeriodSeconds"] = grace
    return pod


@pytest.mark.parametrize(
    "status",
    [k.running(), k.succeeded(), k.application_exit(143)],
    ids=["still-running", "exited-0-on-sigterm", "exited-143-on-sigterm"],
)
def test_a_pod_deleted_while_it_ran_is_lost_whatever_it_exits_with(status: dict) -> None:
    """The containers ended at NOW, the deletion was asked for at NOW: the deletion stopped them (a
    container still running is held until the grace period and the slack are over)."""
    late = NOW + timedelta(seconds=30 + STOP_SLACK_S)
    assert classify(_deleted(status, asked=timedelta(0)), now=late) == Verdict("failed", "node_lost")
    held = "stopping" if "running" in status["containerStatuses"][0]["state"] else "failed"
    assert classify(_deleted(status, asked=timedelta(0)), now=NOW) == Verdict(held, "node_lost")  # type: ignore[arg-type]


def test_a_pod_that_ended_before_its_deletion_keeps_its_own_outcome() -> None:
    later = timedelta(minutes=5)
    assert classify(_deleted(k.succeeded(), asked=later), now=NOW) == Verdict("succeeded")
    assert classify(_deleted(k.application_exit(70), asked=later), now=NOW) == Verdict(
        "failed", "application_exit"
    )


def test_an_eviction_with_a_deletion_stays_an_eviction() -> None:
    status = k.running()
    status["conditions"].append(
        {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}
    )
    assert classify(_deleted(status, asked=timedelta(0)), now=NOW) == Verdict("stopping", "evicted")
    late = NOW + timedelta(seconds=30 + STOP_SLACK_S)
    assert classify(_deleted(status, asked=timedelta(0)), now=late) == Verdict("failed", "evicted")


def test_a_death_is_proven_only_when_the_kubelet_reports_nothing_running() -> None:
    from agentihooks_operator.k8s.observing.classify import nothing_runs

    assert nothing_runs(k.pod(k.oom_killed()))  # terminated
    assert nothing_runs(k.pod(k.application_exit()))
    assert nothing_runs(k.pod(k.pull_failure()))  # waiting on its image: it never started
    assert not nothing_runs(k.pod(k.running()))
    assert not nothing_runs(k.pod(k.pending()))  # no container status at all: nobody says
    assert not nothing_runs(None)  # gone
    init_running = k.pod(k.terminated(3, "Error", init=True))
    init_running["status"]["initContainerStatuses"][0]["state"] = {"running": {}}
    assert not nothing_runs(init_running)  # an init container still runs
