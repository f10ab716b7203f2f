"""The image-pull grace runs on an injected clock: a pull failure is fenced only once it held 120 s."""

from __future__ import annotations

import threading
import time
from typing import Any

import redis
from agentihooks_operator.k8s.observing.observe import pull_since_key
from agentihooks_operator.recovery.store.keys import SwarmKeys
from testsupport import kubelet as kl
from testsupport.kube import eventually, running_operator
from testsupport.node import RealKubelet as Kubelet
from testsupport.realcluster import RealCluster as Cluster

from .conftest import swarm_spec
from .flows import choose, eid, fence, fenced, launch_record, replacement


class Clock:
    """Milliseconds that stand still until the test moves them forward."""

    def __init__(self) -> None:
        self.now_ms = int(time.time() * 1000)
        self._lock = threading.Lock()

    def __call__(self) -> int:
        with self._lock:
            return self.now_ms

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now_ms += int(seconds * 1000)


async def _passes(memo: Any, cluster: Cluster, n: int) -> None:
    """Let ``n`` more recovery passes of the swarm run (each leaves a new result in the memo)."""
    key = (cluster.namespace, "example")
    seen: list[object] = [memo["results"].get(key)]

    def more() -> bool:
        if memo["results"].get(key) is not seen[-1]:
            seen.append(memo["results"].get(key))
        return len(seen) > n

    await eventually(more, what=f"{n} passes")


async def test_pull_failure_waits_out_the_grace(cluster: Cluster, kubelet: Kubelet, redis_url: str) -> None:
    clock = Clock()
    client = redis.Redis.from_url(redis_url)
    key = pull_since_key(SwarmKeys("agentihooks", "example", cluster.namespace))
    async with running_operator(cluster, redis_url, clock=clock) as memo:
        await cluster.create_swarm("example", swarm_spec(grace=120, interval=0.2))
        pods = await eventually(lambda: cluster.pods("example"), what="first Pod")
        first = eid(pods[0])
        await kubelet.set_status(pods[0]["metadata"]["name"], kl.pull_failure("ErrImagePull"))
        seen = await eventually(lambda: client.hget(key, first), what="first pull failure recorded")
        await kubelet.set_status(pods[0]["metadata"]["name"], kl.pull_failure("ImagePullBackOff"))
        await _passes(memo, cluster, 3)
        assert fence(redis_url, "example", first) is None
        assert client.hget(key, first) == seen, "the grace counts from the first failure, not the latest"

        clock.advance(119)
        await _passes(memo, cluster, 3)
        assert fence(redis_url, "example", first) is None

        clock.advance(1)
        record = await fenced(redis_url, "example", first)
        assert record.reason == "image_pull"
        assert "no transcript" in record.tail

        async def awaiting() -> bool:
            cards = ((await cluster.swarm("example")).get("status") or {}).get("handoffs") or []
            return bool(cards) and cards[0]["binding"] == "awaiting decision"

        await eventually(awaiting, what="card awaiting decision")

        assert choose(redis_url, "example", first, "fresh")
        second = await replacement(cluster, "example", 2)
        assert (await launch_record(cluster, eid(second))).authority.generation == 2
    client.close()


async def test_a_pull_failure_that_clears_restarts_the_grace(
    cluster: Cluster, kubelet: Kubelet, redis_url: str
) -> None:
    clock = Clock()
    client = redis.Redis.from_url(redis_url)
    key = pull_since_key(SwarmKeys("agentihooks", "example", cluster.namespace))
    async with running_operator(cluster, redis_url, clock=clock) as memo:
        await cluster.create_swarm("example", swarm_spec(grace=120, interval=0.2))
        pods = await eventually(lambda: cluster.pods("example"), what="first Pod")
        name, first = pods[0]["metadata"]["name"], eid(pods[0])
        await kubelet.set_status(name, kl.pull_failure("InvalidImageName"))
        await eventually(lambda: client.hget(key, first), what="pull failure recorded")
        clock.advance(100)
        await kubelet.put_node("kind-worker")
        await kubelet.set_status(name, kl.running(), node_name="kind-worker")
        await eventually(lambda: client.hget(key, first) is None, what="grace cleared")
        await kubelet.set_status(name, kl.pull_failure("ErrImagePull"))
        await eventually(lambda: client.hget(key, first), what="pull failure recorded again")
        clock.advance(100)  # 200 s since the first failure, 100 s since this one
        await _passes(memo, cluster, 3)
        assert fence(redis_url, "example", first) is None
    client.close()
