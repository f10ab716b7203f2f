"""The operator SIGKILLed after a replacement's launch, before it deleted what the fenced attempt left.

The fenced Pod is deleted before the launch; the fenced attempt's Secret
(credential and launch record) is deleted only after it, from a ledger in
Redis. An operator that dies in between leaves the Secret and the ledger
entry; the next lease holder deletes it, once, and the ledger empties.

The fenced attempt here also carries what the release before this one left
beside each attempt, its launch ConfigMap (made here as that release made
it): the next holder lists the swarm's launch ConfigMaps once and deletes
that one with the Secret, once. The replacement has none.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path

import redis
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores.local import LocalStore
from agentihooks_operator.k8s.leftovers import leftovers_key
from agentihooks_operator.recovery.store.keys import SwarmKeys
from testsupport import kubelet as kl
from testsupport.checkpoints import build_checkpoint
from testsupport.kube import eventually, operator_process
from testsupport.node import RealKubelet as Kubelet
from testsupport.realcluster import RealCluster as Cluster

from .conftest import swarm_spec
from .flows import eid, fenced, replacement, running_seat

POINT = "before:clean_leftovers"


async def test_killed_between_launch_and_cleanup_then_cleaned_once(
    cluster: Cluster, kubelet: Kubelet, redis_url: str, tmp_path: Path
) -> None:
    client = redis.Redis.from_url(redis_url)
    keys = SwarmKeys("agentihooks", "example", cluster.namespace)
    store = LocalStore(tmp_path / "checkpoints")
    env = {"AGENTIHOOKS_CHECKPOINT_ROOT": str(tmp_path / "checkpoints")}
    spec = swarm_spec(interval=0.3)
    spec["seats"][0]["project"] = "local:fixture"
    await cluster.create_swarm("example", spec)
    async with operator_process(
        cluster, redis_url, tmp_path, operator_id="op-a", kill_at=POINT, extra_env=env
    ) as a:
        first = await running_seat(cluster, kubelet, "example")
        lost = eid(first)
        built = await asyncio.to_thread(
            build_checkpoint,
            store,
            StoreScope(swarm="example", task_id="t-1", task_generation=1, namespace=cluster.namespace),
            tmp_path / "work",
            checkpoint_id="ckpt-7",
            execution_id=lost,
            compatibility_key="2.1.0",
        )
        # The launch ConfigMap the release before this one made beside each attempt.
        old_launch = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": f"swarm-{lost}-launch",
                "labels": {**first["metadata"]["labels"]},
                "ownerReferences": first["metadata"]["ownerReferences"],
            },
            "data": {"launch.json": "{}"},
        }
        made = await cluster.http.post(f"/api/v1/namespaces/{cluster.namespace}/configmaps", json=old_launch)
        assert made.status_code == 201, made.text
        # What the attempt's heartbeat records: the native session it holds (so no one must choose).
        beat = {"session_id": built.session_id, "at_ms": int(time.time() * 1000)}
        client.hset(keys.heartbeats, lost, json.dumps(beat))
        await kubelet.set_status(first["metadata"]["name"], kl.oom_killed())
        await eventually(lambda: a.poll() is not None, timeout=30, what=f"operator killed at {POINT}")
        assert a.returncode == -signal.SIGKILL
    assert f"SIGKILL at {POINT}" in (tmp_path / "op-a.log").read_text()

    # Killed after the launch: the replacement exists, the fenced Pod is gone, its objects are left.
    assert (await fenced(redis_url, "example", lost)).reason == "oom_killed"
    second = await replacement(cluster, "example", 2)
    secret = f"/api/v1/namespaces/{cluster.namespace}/secrets/swarm-{lost}-credential"
    configmap = f"/api/v1/namespaces/{cluster.namespace}/configmaps/swarm-{lost}-launch"
    # The operator deleted the fenced Pod (gracefully); the kubelet finishes that deletion on its own time.
    assert cluster.count("delete", "pods", f"swarm-{lost}") == 1

    async def pod_gone() -> bool:
        return await cluster.get(f"/api/v1/namespaces/{cluster.namespace}/pods/swarm-{lost}") is None

    await eventually(pod_gone, what="the fenced Pod's deletion finished by the kubelet")
    assert await cluster.get(secret) is not None and await cluster.get(configmap) is not None
    assert client.smembers(leftovers_key(keys)) == {lost.encode()}
    assert cluster.count("delete", "secrets", f"swarm-{lost}") == 0

    async with operator_process(cluster, redis_url, tmp_path, operator_id="op-b", extra_env=env):

        async def cleaned() -> bool:
            return await cluster.get(secret) is None and await cluster.get(configmap) is None

        await eventually(cleaned, what="leftovers of the fenced attempt deleted by op-b")
        await running_seat(cluster, kubelet, "example", generation=2)  # more passes run after that

        async def running() -> bool:
            return ((await cluster.swarm("example")).get("status") or {}).get("running") == 1

        await eventually(running, what="replacement running")

    assert client.smembers(leftovers_key(keys)) == set()
    assert cluster.count("delete", "pods", f"swarm-{lost}") == 1
    assert cluster.count("delete", "secrets", f"swarm-{lost}") == 1
    assert cluster.count("delete", "configmaps", f"swarm-{lost}") == 1
    assert cluster.count("delete", "configmaps") == 1 and cluster.count("create", "configmaps") == 0
    assert cluster.count("list", "configmaps") <= 2  # once per operator process that cleaned
    assert cluster.count("create", "pods", f"swarm-{eid(second)}") == 1
    assert (
        await cluster.get(f"/api/v1/namespaces/{cluster.namespace}/secrets/swarm-{eid(second)}-credential")
        is not None
    )
    client.close()
