"""A launch whose answer was lost, on the real API server and real Redis, with the operator's launcher
and identity: its Pod deleted before any pass confirmed it is never created again, even by a replica
that never watched it (its Secret, sent beside the Pod, is the evidence); while a launch that was
refused (a quota: its Secret made, its Pod not) is sent again once the quota allows it, and so is one
whose Pod create never reached the API server."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Literal

import pytest
import redis
from agentihooks_checkpoint.catalog import EmptyCatalog
from agentihooks_operator.k8s.building.pods import Owner, pod_name
from agentihooks_operator.k8s.client import KubeClient, Retries
from agentihooks_operator.k8s.launcher import KubernetesLauncher
from agentihooks_operator.recovery import AttemptObservation, LaunchPlan, Recovery
from agentihooks_operator.swarm import SwarmSpec
from testsupport.realcluster import RealCluster as Cluster

from .conftest import swarm_spec


class AnswerLost:
    """The operator's launcher, except that the answer of the next launch never comes back."""

    def __init__(self, inner: KubernetesLauncher) -> None:
        self.inner = inner
        self.lose = False

    def launch(self, plan: LaunchPlan) -> Literal["created", "exists"]:
        answer = self.inner.launch(plan)
        if self.lose:
            self.lose = False
            raise ConnectionError("the connection broke before the create's answer came")
        return answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _replica(cluster: Cluster, redis_url: str, holder: str) -> tuple[Recovery, AnswerLost]:
    """A freshly started replica: its own launcher, no Pod watch behind it (nothing seen deleted)."""
    spec = SwarmSpec.model_validate(swarm_spec(automation=False))
    owner = Owner(name="example", namespace=cluster.namespace, uid=None, controller=holder)
    launcher = AnswerLost(KubernetesLauncher(cluster.operator_client(), owner, lambda: spec))
    r = Recovery(
        redis.Redis.from_url(redis_url),
        "example",
        holder=holder,
        catalog=EmptyCatalog(),
        launcher=launcher,
        namespace=cluster.namespace,
        lease_ms=2000,
    )
    return r, launcher


def _launch_entry(r: Recovery, eid: str) -> dict[str, Any]:
    raw = r._w.client.hget(r.keys.attempt_journal, eid)
    return dict(json.loads(raw)["launch"])


async def _gone(cluster: Cluster, path: str) -> None:
    for _ in range(200):
        if await cluster.get(path) is None:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{path} still there")


async def test_a_pod_deleted_before_its_lost_launch_was_confirmed_is_never_created_again(
    cluster: Cluster, redis_url: str
) -> None:
    spec = SwarmSpec.model_validate(swarm_spec(automation=False))
    first, lossy = _replica(cluster, redis_url, "op-a")
    assert await asyncio.to_thread(first.acquire)
    lossy.lose = True
    with pytest.raises(ConnectionError):
        await asyncio.to_thread(first.ensure_seats, spec)
    eid = first.current_execution("eng-1")
    assert eid is not None and _launch_entry(first, eid)["status"] == "unknown"
    name = pod_name(eid)
    assert cluster.created("pods", name) == 1  # it took effect; its answer was lost

    # Someone deletes the Pod before any pass looked; the replica that sent it is gone.
    r = await cluster.http.delete(f"/api/v1/namespaces/{cluster.namespace}/pods/{name}")
    assert r.status_code in (200, 202)
    await _gone(cluster, f"/api/v1/namespaces/{cluster.namespace}/pods/{name}")
    await asyncio.to_thread(first.give_up)

    second, _ = _replica(cluster, redis_url, "op-b")
    assert await asyncio.to_thread(second.acquire)
    await asyncio.to_thread(second.reconcile, spec, [])
    assert cluster.created("pods", name) == 1, "the attempt's Pod was created a second time"
    assert _launch_entry(second, eid)["status"] == "ok"
    await asyncio.to_thread(second.reconcile, spec, [])
    assert cluster.created("pods", name) == 1

    # Its Pod is missing: fenced like any lost Pod; the seat waits for a decision (automation off).
    gone = AttemptObservation(execution_id=eid, seat="eng-1", generation=1, state="gone")
    report = await asyncio.to_thread(second.reconcile, spec, [gone])
    assert report.fenced == [eid]
    assert cluster.created("pods", "swarm-") == 1


async def test_a_launch_refused_by_a_quota_is_sent_again_once_allowed(
    cluster: Cluster, redis_url: str
) -> None:
    ns = cluster.namespace
    cluster.expected_denials = {("create", "", "pods")}  # type: ignore[attr-defined]  # the quota's 403
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "no-pods"},
        "spec": {"hard": {"pods": "0"}},
    }
    made = await cluster.http.post(f"/api/v1/namespaces/{ns}/resourcequotas", json=quota)
    assert made.status_code == 201, made.text
    for _ in range(200):  # enforced once the quota controller has filled in its status
        got = await cluster.get(f"/api/v1/namespaces/{ns}/resourcequotas/no-pods")
        if ((got or {}).get("status") or {}).get("hard"):
            break
        await asyncio.sleep(0.05)

    spec = SwarmSpec.model_validate(swarm_spec(automation=False))
    r, _ = _replica(cluster, redis_url, "op-a")
    assert await asyncio.to_thread(r.acquire)
    assert await asyncio.to_thread(r.ensure_seats, spec) == []  # the Pod refused: blocked
    eid = r.current_execution("eng-1")
    assert eid is not None
    entry = _launch_entry(r, eid)
    assert entry["status"] == "unknown" and "quota" in entry["detail"] and not entry.get("inflight")
    assert await cluster.get(f"/api/v1/namespaces/{ns}/secrets/{pod_name(eid)}-credential") is not None

    await cluster.http.delete(f"/api/v1/namespaces/{ns}/resourcequotas/no-pods")
    await _gone(cluster, f"/api/v1/namespaces/{ns}/resourcequotas/no-pods")
    later = [1e12]
    r._ctx.waits.clock = lambda: later[0]  # its backoff ran out
    for _ in range(100):  # the quota admission's cache may refuse once more: each try is one send
        await asyncio.to_thread(r.reconcile, spec, [])
        if cluster.created("pods", pod_name(eid)):
            break
        later[0] += 1e6
        await asyncio.sleep(0.1)
    assert cluster.created("pods", pod_name(eid)) == 1
    assert _launch_entry(r, eid)["status"] == "ok"
    await asyncio.to_thread(r.reconcile, spec, [])
    assert cluster.created("pods", pod_name(eid)) == 1


class PodsUnreachable:
    """The operator's client, except that Pod creates go to a loopback port nobody listens on: a real
    refused connection on every try, while the Secret beside the Pod reaches the API server."""

    def __init__(self, real: KubeClient) -> None:
        self.real = real
        self.dead = KubeClient(
            "https://127.0.0.1:9", token="unused", retries=Retries(tries=3, base_delay=0.01)
        )
        self.down = True

    def create(self, resource: str, namespace: str | None, body: dict[str, Any]) -> dict[str, Any]:
        via = self.dead if self.down and resource == "pods" else self.real
        return via.create(resource, namespace, body)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


async def test_a_pod_create_that_never_reached_the_api_server_is_sent_again_not_counted_lost(
    cluster: Cluster, redis_url: str
) -> None:
    """Its Secret was made (sent beside it) but the Pod's create never left this process: the launch
    is blocked (``api_unavailable``), not taken for made-then-lost, and the next pass creates the same
    attempt's Pod, once. Before, the Secret alone read as "made and lost": the attempt was fenced and
    the seat waited for a second decision after an API-server restart (found by a CI run)."""
    ns = cluster.namespace
    spec = SwarmSpec.model_validate(swarm_spec(automation=False))
    kube = PodsUnreachable(cluster.operator_client())
    owner = Owner(name="example", namespace=ns, uid=None, controller="op-a")
    launcher = KubernetesLauncher(kube, owner, lambda: spec)  # type: ignore[arg-type]
    r = Recovery(
        redis.Redis.from_url(redis_url),
        "example",
        holder="op-a",
        catalog=EmptyCatalog(),
        launcher=launcher,
        namespace=ns,
        lease_ms=2000,
    )
    assert await asyncio.to_thread(r.acquire)
    assert await asyncio.to_thread(r.ensure_seats, spec) == []  # blocked, not failed
    eid = r.current_execution("eng-1")
    assert eid is not None
    entry = _launch_entry(r, eid)
    assert entry["status"] == "unknown" and entry["reason"] == "api_unavailable", entry
    assert "could not be reached" in entry["detail"] and not entry.get("inflight")
    assert await cluster.get(f"/api/v1/namespaces/{ns}/secrets/{pod_name(eid)}-credential") is not None
    assert cluster.created("pods", pod_name(eid)) == 0

    kube.down = False  # the API server is back
    r._ctx.waits.clock = lambda: 1e12  # its (short) wait ran out
    await asyncio.to_thread(r.reconcile, spec, [])
    assert r.current_execution("eng-1") == eid, "the same attempt is launched, no generation is lost"
    assert cluster.created("pods", pod_name(eid)) == 1
    assert _launch_entry(r, eid)["status"] == "ok"
    await asyncio.to_thread(r.reconcile, spec, [])
    assert cluster.created("pods", "swarm-") == 1
    launcher.close()
