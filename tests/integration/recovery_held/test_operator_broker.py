"""The real operator calls the swarm's account broker with the credential of the Secret its spec names.

The operator runs against the emulated Kubernetes API and real Redis; the
broker is the real HTTP test server, which refuses (401) any request without
``Authorization: Bearer <token>``. A failed seat's account slot is released
there exactly once.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis
from agentihooks_operator.recovery import FenceRecord
from agentihooks_operator.recovery.keys import SwarmKeys
from testsupport import kubelet as kl
from testsupport.broker import Broker
from testsupport.kube import Cluster, emulated_cluster, eventually, running_operator
from testsupport.kubelet import Kubelet

SWARM = "brokered"


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with emulated_cluster(tmp_path) as c:
        yield c


@pytest.fixture
async def kubelet(cluster: Cluster) -> AsyncIterator[Kubelet]:
    k = Kubelet(cluster.url)
    yield k
    await k.close()


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


async def test_operator_releases_the_slot_once_with_the_secret_credential(
    cluster: Cluster, kubelet: Kubelet, redis_url: str, broker: Broker, credential: str
) -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "broker-cred", "namespace": "default"},
        "data": {"token": base64.b64encode(credential.encode()).decode()},
    }
    (await cluster.http.post("/api/v1/namespaces/default/secrets", json=secret)).raise_for_status()
    async with running_operator(cluster, redis_url) as memo:
        await cluster.create_swarm(SWARM, spec(broker.url))
        pod = await eventually(lambda: _first_pod(cluster), what="generation 1 Pod")
        eid = pod["metadata"]["labels"]["swarm.agentihooks.io/execution-id"]
        await kubelet.put_node("kind-worker")
        await kubelet.set_status(pod["metadata"]["name"], kl.running(), node_name="kind-worker")
        await kubelet.set_status(pod["metadata"]["name"], kl.oom_killed())
        await eventually(lambda: broker.applied[eid] == 1, timeout=30, what="the broker's release")
        # the release is recorded in the fence, so the passes that follow never send it again
        released = await eventually(lambda: _account_release(redis_url, eid), timeout=30, what="fence")
        assert released == "confirmed"
        results: list[object] = []

        def passes_after(n: int) -> bool:
            current = memo["results"].get(("default", SWARM))
            if not results or current is not results[-1]:
                results.append(current)
            return len(results) > n

        await eventually(lambda: passes_after(3), timeout=30, what="three more passes")
    assert broker.applied[eid] == 1 and broker.total() == 1
    assert broker.unauthorized == 0
    assert ("release", eid) in broker.requests


async def _first_pod(cluster: Cluster) -> dict[str, object] | None:
    pods = await cluster.pods(SWARM)
    return pods[0] if pods else None


def _account_release(redis_url: str, eid: str) -> str | None:
    client = redis.Redis.from_url(redis_url)
    try:
        raw = client.hget(SwarmKeys("agentihooks", SWARM).attempt_fences, eid)
    finally:
        client.close()
    return FenceRecord.model_validate_json(raw).account_release if raw else None


async def test_a_held_step_shows_as_events_and_a_status_count(
    cluster: Cluster, kubelet: Kubelet, redis_url: str, broker: Broker, credential: str
) -> None:
    broker.mode = "refuse_state"  # the release is applied, its answer lost, and the state cannot be read
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "broker-cred", "namespace": "default"},
        "data": {"token": base64.b64encode(credential.encode()).decode()},
    }
    (await cluster.http.post("/api/v1/namespaces/default/secrets", json=secret)).raise_for_status()
    async with running_operator(cluster, redis_url):
        await cluster.create_swarm(SWARM, spec(broker.url))
        pod = await eventually(lambda: _first_pod(cluster), what="generation 1 Pod")
        eid = pod["metadata"]["labels"]["swarm.agentihooks.io/execution-id"]
        await kubelet.put_node("kind-worker")
        await kubelet.set_status(pod["metadata"]["name"], kl.running(), node_name="kind-worker")
        await kubelet.set_status(pod["metadata"]["name"], kl.oom_killed())

        async def held_events() -> list[dict[str, object]] | None:
            found = [e for e in await cluster.events() if e.get("reason") == "RecoveryHeld"]
            return found if len(found) >= 2 else None

        events = await eventually(held_events, timeout=30, what="RecoveryHeld events")
        status = await eventually(lambda: _held_status(cluster), timeout=30, what="status.held")
    kinds = {e["involvedObject"]["kind"]: e for e in events}  # type: ignore[index]
    assert set(kinds) == {"Swarm", "Pod"}
    assert kinds["Pod"]["involvedObject"]["name"] == pod["metadata"]["name"]  # type: ignore[index]
    for e in events:
        assert e["type"] == "Warning"
        message = str(e["message"])
        assert "held at step release_account" in message and eid in message
        assert credential not in message and "token" not in message.lower()
    assert len(events) == 2  # one hold: one Event on the Swarm, one on the Pod
    assert status["held"] == 1
    (card,) = status["handoffs"]
    assert card["held"]["step"] == "release_account" and card["binding"] == "recovering"
    assert broker.applied[eid] == 1


async def _held_status(cluster: Cluster) -> dict[str, object] | None:
    status = (await cluster.swarm(SWARM)).get("status") or {}
    return status if status.get("held") else None
