"""Steps the operator scenarios share: launch a seat, fail it, read fences, choose, await the replacement."""

from __future__ import annotations

import base64
import json
from typing import Any

import redis
from agentihooks_checkpoint.launch import LaunchRecord
from agentihooks_operator.recovery import FenceRecord
from testsupport import kubelet as kl
from testsupport.kube import eventually
from testsupport.node import RealKubelet as Kubelet
from testsupport.realcluster import RealCluster as Cluster
from testsupport.recovery import keys_of, record_choice

NODE = "kind-worker"


def gen(pod: dict[str, Any]) -> int:
    return int(pod["metadata"]["labels"]["swarm.agentihooks.io/generation"])


def eid(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["labels"]["swarm.agentihooks.io/execution-id"])


async def running_seat(cluster: Cluster, kubelet: Kubelet, swarm: str, generation: int = 1) -> dict[str, Any]:
    """Wait for the seat's Pod of ``generation`` and move it to Running on a Ready node."""

    async def pod() -> dict[str, Any] | None:
        return next((p for p in await cluster.pods(swarm) if gen(p) == generation), None)

    found = await eventually(pod, what=f"generation {generation} Pod")
    await kubelet.put_node(NODE)
    await kubelet.set_status(found["metadata"]["name"], kl.running(), node_name=NODE)
    return dict(found)


def fence(redis_url: str, swarm: str, execution_id: str) -> FenceRecord | None:
    client = redis.Redis.from_url(redis_url)
    try:
        raw = client.hget(keys_of(client, swarm).attempt_fences, execution_id)
    finally:
        client.close()
    return FenceRecord.model_validate_json(raw) if raw else None


async def fenced(redis_url: str, swarm: str, execution_id: str, timeout: float = 20.0) -> FenceRecord:
    return await eventually(
        lambda: fence(redis_url, swarm, execution_id), timeout=timeout, what=f"fence of {execution_id}"
    )


def choose(redis_url: str, swarm: str, execution_id: str, choice: str = "fresh") -> bool:
    """What ``agentihooks swarm NAME restore-decision SEAT fresh`` does: record a request."""
    return record_choice(redis_url, swarm, execution_id, choice)


async def replacement(cluster: Cluster, swarm: str, generation: int) -> dict[str, Any]:
    async def pod() -> dict[str, Any] | None:
        return next((p for p in await cluster.pods(swarm) if gen(p) == generation), None)

    return dict(await eventually(pod, what=f"replacement Pod of generation {generation}"))


async def launch_record(cluster: Cluster, execution_id: str) -> LaunchRecord:
    """The attempt's launch record, a key of its Secret. The Secret is created beside the Pod, not
    before it (a Pod seen may still wait for it a moment), so it is awaited."""
    path = f"/api/v1/namespaces/{cluster.namespace}/secrets/swarm-{execution_id}-credential"
    secret = await eventually(lambda: cluster.get(path), what="the attempt's Secret")
    return LaunchRecord.model_validate(json.loads(base64.b64decode(secret["data"]["launch.json"])))


async def pod_gone(cluster: Cluster, execution_id: str) -> bool:
    return await cluster.get(f"/api/v1/namespaces/{cluster.namespace}/pods/swarm-{execution_id}") is None


async def pod_deleted(cluster: Cluster, execution_id: str) -> bool:
    """Gone, or its deletion under way (a Pod on a lost node stays Terminating until the node returns)."""
    pod = await cluster.get(f"/api/v1/namespaces/{cluster.namespace}/pods/swarm-{execution_id}")
    return pod is None or bool(pod["metadata"].get("deletionTimestamp"))


async def event_reasons(cluster: Cluster, kind: str, name: str) -> list[str]:
    return [
        e["reason"]
        for e in await cluster.events()
        if e["involvedObject"]["kind"] == kind and e["involvedObject"]["name"] == name
    ]


async def has_events(cluster: Cluster, kind: str, name: str, reasons: set[str]) -> None:
    """Wait until Events with all of ``reasons`` exist on the object (they are sent off the pass)."""

    async def check() -> bool:
        return reasons <= set(await event_reasons(cluster, kind, name))

    await eventually(check, what=f"events {sorted(reasons)} on {kind} {name}")
