"""The real operator calls the swarm's account broker with the credential of the Secret its spec names.

The operator runs against the real control plane (its own namespace, the
chart's RBAC as its only rights) and real Redis; the simulated kubelet binds
the seat's Pod and reports it OOMKilled through the status subresource. The
broker is the real HTTP test server, which refuses (401) any request without
``Authorization: Bearer <token>``; the operator reads that token from the
Secret by name with its own identity. A failed seat's account slot is
released there exactly once.
"""

from __future__ import annotations

import base64

import redis
from agentihooks_operator.recovery import FenceRecord
from testsupport import kubelet as kl
from testsupport.broker import Broker
from testsupport.kube import eventually, running_operator
from testsupport.node import RealKubelet
from testsupport.realcluster import RealCluster
from testsupport.recovery import keys_of

SWARM = "brokered"
NODE = "kind-worker"


def spec(broker_url: str) -> dict[str, object]:
    return {
        "image": "ghcr.io/agentihooks/worker:2.1.0",
        "harness": {"name": "claude", "command": ["claude", "-p", "work"]},
        "seats": [
            {"name": "eng-1", "project": "github.com/acme/app", "task": {"id": "t-1", "text": "task 1"}}
        ],
        "recovery": {"automation": True, "passIntervalSeconds": 0.5},
        "accountBroker": {"url": broker_url, "credentialSecret": "broker-cred", "timeoutSeconds": 5},
    }


async def _broker_secret(cluster: RealCluster, credential: str) -> None:
    """The broker's credential Secret, created by the admin (the operator may only read it by name)."""
    ns = cluster.namespace
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "broker-cred", "namespace": ns},
        "data": {"token": base64.b64encode(credential.encode()).decode()},
    }
    (await cluster.http.post(f"/api/v1/namespaces/{ns}/secrets", json=secret)).raise_for_status()


async def _oom_kill_first_seat(cluster: RealCluster, kubelet: RealKubelet) -> tuple[dict[str, object], str]:
    pod = await eventually(lambda: _first_pod(cluster), what="generation 1 Pod")
    name = pod["metadata"]["name"]  # type: ignore[index]
    await kubelet.set_status(name, kl.running(), node_name=NODE)
    await kubelet.set_status(name, kl.oom_killed())
    return pod, str(pod["metadata"]["labels"]["swarm.agentihooks.io/execution-id"])  # type: ignore[index]


async def test_operator_releases_the_slot_once_with_the_secret_credential(
    real_cluster: RealCluster, real_kubelet: RealKubelet, redis_url: str, broker: Broker, credential: str
) -> None:
    cluster = real_cluster
    await _broker_secret(cluster, credential)
    async with running_operator(cluster, redis_url) as memo:
        await cluster.create_swarm(SWARM, spec(broker.url))
        _, eid = await _oom_kill_first_seat(cluster, real_kubelet)
        await eventually(lambda: broker.applied[eid] == 1, timeout=30, what="the broker's release")
        # the release is recorded in the fence, so the passes that follow never send it again
        released = await eventually(lambda: _account_release(redis_url, eid), timeout=30, what="fence")
        assert released == "confirmed"
        results: list[object] = []

        def passes_after(n: int) -> bool:
            current = memo["results"].get((cluster.namespace, SWARM))
            if not results or current is not results[-1]:
                results.append(current)
            return len(results) > n

        await eventually(lambda: passes_after(3), timeout=30, what="three more passes")
        # the fenced Pod is deleted (the kubelet finishes the deletion) and nothing else launched
        await eventually(
            lambda: _gone(cluster, eid), timeout=30, what="the fenced Pod removed from the API server"
        )
        assert await cluster.pods(SWARM) == []
    assert broker.applied[eid] == 1 and broker.total() == 1
    assert broker.unauthorized == 0
    assert ("release", eid) in broker.requests
    # the credential came from the Secret, read by name with the operator's own identity
    assert cluster.count("get", "secrets", "broker-cred") >= 1
    assert cluster.count("create", "pods") == 1


async def _first_pod(cluster: RealCluster) -> dict[str, object] | None:
    pods = await cluster.pods(SWARM)
    return pods[0] if pods else None


async def _gone(cluster: RealCluster, eid: str) -> bool:
    return await cluster.get(f"/api/v1/namespaces/{cluster.namespace}/pods/swarm-{eid}") is None


def _account_release(redis_url: str, eid: str) -> str | None:
    client = redis.Redis.from_url(redis_url)
    try:
        raw = client.hget(keys_of(client, SWARM).attempt_fences, eid)
    finally:
        client.close()
    return FenceRecord.model_validate_json(raw).account_release if raw else None


async def test_a_held_step_shows_as_events_and_a_status_count(
    real_cluster: RealCluster, real_kubelet: RealKubelet, redis_url: str, broker: Broker, credential: str
) -> None:
    cluster = real_cluster
    broker.mode = "refuse_state"  # the release is applied, its answer lost, and the state cannot be read
    await _broker_secret(cluster, credential)
    async with running_operator(cluster, redis_url):
        await cluster.create_swarm(SWARM, spec(broker.url))
        pod, eid = await _oom_kill_first_seat(cluster, real_kubelet)

        async def held_events() -> list[dict[str, object]] | None:
            found = [e for e in await cluster.events() if e.get("reason") == "RecoveryHeld"]
            return found if len(found) >= 2 else None

        events = await eventually(held_events, timeout=30, what="RecoveryHeld events")
        status = await eventually(lambda: _held_status(cluster), timeout=30, what="status.held")
    kinds = {e["involvedObject"]["kind"]: e for e in events}  # type: ignore[index]
    assert set(kinds) == {"Swarm", "Pod"}
    assert kinds["Pod"]["involvedObject"]["name"] == pod["metadata"]["name"]  # type: ignore[index]
    assert kinds["Swarm"]["involvedObject"]["uid"] == (await cluster.swarm(SWARM))["metadata"]["uid"]  # type: ignore[index]
    for e in events:
        assert e["type"] == "Warning"
        message = str(e["message"])
        assert "held at step release_account" in message and eid in message
        assert credential not in message and "token" not in message.lower()
    # one hold: one Event on the Swarm, one on the Pod (read again after the operator stopped)
    assert len([e for e in await cluster.events() if e.get("reason") == "RecoveryHeld"]) == 2
    assert status["held"] == 1
    (card,) = status["handoffs"]  # type: ignore[misc]
    assert card["held"]["step"] == "release_account" and card["binding"] == "recovering"
    assert broker.applied[eid] == 1


async def _held_status(cluster: RealCluster) -> dict[str, object] | None:
    status = (await cluster.swarm(SWARM)).get("status") or {}
    return status if status.get("held") else None
