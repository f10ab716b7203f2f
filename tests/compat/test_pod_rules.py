"""Worker Pods as the original names and labels them, and Pods of another controller (COMPAT.md, "Pods").

Each test names its rule (``POD-<n>``, listed in docs/compatibility.md). The foreign-Pod
tests run a real recovery pass (``SwarmPass`` over the real recovery core and a real
redis-server); the Kubernetes API is a recording stand-in that lists the Pods given.
"""

from __future__ import annotations

import threading
from typing import Any

import redis
from agentihooks_checkpoint.catalog import EmptyCatalog
from agentihooks_operator.k8s.building.pods import Execution, Owner, build_pod_spec, owner_value
from agentihooks_operator.k8s.swarmpass import SwarmPass
from agentihooks_operator.recovery import Recovery
from testsupport.original_records import original_pod
from testsupport.recovery import MemoryLauncher, swarm_spec

D = "swarm.agentihooks.io"
SWARM = "swarm-a"


def test_pod_1_controller_owner_is_agentihooks_swarm_slug_for_every_replica() -> None:
    """POD-1: controller-owner is agentihooks-swarm-<slug>; the operator's id goes to an annotation."""
    ex = Execution("exe-" + "3" * 32, 1, "eng-1", "task-1", 1, "grant-1", 4)
    pods = [
        build_pod_spec(swarm_spec(), Owner(name=SWARM, namespace="default", uid=None, controller=op), ex)
        for op in ("host-a-101", "host-b-202")
    ]
    assert {p["metadata"]["labels"][f"{D}/controller-owner"] for p in pods} == {"agentihooks-swarm-swarm-a"}
    assert owner_value(SWARM) == "agentihooks-swarm-swarm-a"
    assert [p["metadata"]["annotations"][f"{D}/operator-id"] for p in pods] == ["host-a-101", "host-b-202"]


def test_pod_2_the_original_labels_annotations_container_and_restart_policy() -> None:
    """POD-2: name swarm-<execution_id>; the original's labels and annotations; container agent; Never."""
    ex = Execution("exe-" + "3" * 32, 2, "eng-1", "task-1", 1, "grant-1", 4)
    pod = build_pod_spec(swarm_spec(), Owner(name=SWARM, namespace="default", uid=None, controller="op"), ex)
    theirs = original_pod(ex.execution_id, SWARM)
    assert pod["metadata"]["name"] == theirs["metadata"]["name"] == f"swarm-{ex.execution_id}"
    assert set(pod["metadata"]["labels"]) == set(theirs["metadata"]["labels"])
    assert set(theirs["metadata"]["annotations"]) <= set(pod["metadata"]["annotations"])
    assert [c["name"] for c in pod["spec"]["containers"]] == ["agent"]
    assert pod["spec"]["restartPolicy"] == "Never"


class RecordingKube:
    """Lists the given Pods for the swarm's label; records every write (none may touch a foreign Pod)."""

    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.pods = pods
        self.writes: list[tuple[str, str, str]] = []
        self.events: list[dict[str, Any]] = []
        self.status: dict[str, Any] = {}
        self.lock = threading.Lock()

    def list(self, resource: str, namespace: str | None, labels: dict[str, str] | None = None) -> list[Any]:
        if resource == "nodes":
            return [
                {
                    "metadata": {"name": "node-1"},
                    "status": {"conditions": [{"type": "Ready", "status": "True"}]},
                }
            ]
        assert resource == "pods" and labels == {f"{D}/swarm": SWARM}
        return list(self.pods)

    def create(self, resource: str, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            if resource == "events":
                self.events.append(body)
            else:
                self.writes.append(("create", resource, body["metadata"]["name"]))
        return body

    def patch(
        self, resource: str, namespace: str, name: str, body: dict[str, Any], sub: str | None = None
    ) -> Any:
        with self.lock:
            if sub == "status":
                self.status = body["status"]
            else:
                self.writes.append(("patch", resource, name))
        return body

    def delete(self, resource: str, namespace: str, name: str) -> None:
        with self.lock:
            self.writes.append(("delete", resource, name))

    def get(self, resource: str, namespace: str, name: str) -> Any:
        return None


def run_pass(redis_url: str, owner_of_failed: str | None) -> tuple[RecordingKube, MemoryLauncher, Any, str]:
    """One swarm, one seat; its attempt's Pod is OOM-killed and carries ``owner_of_failed``."""
    client = redis.Redis.from_url(redis_url)
    launcher = MemoryLauncher()
    spec = swarm_spec()
    recovery = Recovery(client, SWARM, holder="op-a", catalog=EmptyCatalog(), launcher=launcher)
    [first] = recovery.ensure_seats(spec)
    killed = original_pod(
        first.execution_id,
        SWARM,
        owner=owner_of_failed,
        phase="Failed",
        container_state={"terminated": {"exitCode": 137, "reason": "OOMKilled"}},
    )
    stray = original_pod("exe-" + "f" * 32, SWARM, owner="another-controller")
    del stray["metadata"]["labels"][f"{D}/controller-owner"]
    kube = RecordingKube([killed, stray])
    runner = SwarmPass(
        recovery=recovery,
        redis_client=client,
        keys=recovery.keys,
        kube=kube,  # type: ignore[arg-type]
        owner=Owner(name=SWARM, namespace="default", uid="uid-1", controller="op-a"),
        clock=lambda: 1_000_000,
    )
    result = runner.run(spec)
    runner.close()
    client.close()
    return kube, launcher, result, first.execution_id


def test_pod_3_foreign_pods_are_reported_and_never_touched(redis_url: str) -> None:
    """POD-3: a Pod with the swarm's label but a foreign owner value is reported, never fenced or deleted."""
    kube, launcher, result, eid = run_pass(redis_url, owner_of_failed="host-a-101")
    assert result.leader and result.report is not None
    assert result.report.fenced == [] and result.report.launches == []
    assert [o.state for o in result.observations] == ["pending"]
    assert kube.writes == [] and launcher.retired == {}
    assert kube.status["foreignPods"] == 2
    foreign = [e for e in kube.events if e["reason"] == "ForeignPod"]
    assert len(foreign) == 2 and all(e["type"] == "Warning" for e in foreign)
    assert all(e["involvedObject"]["kind"] == "Swarm" for e in foreign)
    assert any(f"swarm-{eid}" in e["message"] and "'host-a-101'" in e["message"] for e in foreign)


def test_pod_3_the_same_pod_with_the_swarms_owner_value_is_recovered(redis_url: str) -> None:
    """POD-3 (contrast): with agentihooks-swarm-<slug> the same OOM-killed Pod is fenced and replaced."""
    kube, launcher, result, eid = run_pass(redis_url, owner_of_failed=None)
    assert result.report is not None and result.report.fenced == [eid]
    assert launcher.retired[eid] == 1
    assert kube.status["foreignPods"] == 1
    assert [e["reason"] for e in kube.events].count("ForeignPod") == 1
