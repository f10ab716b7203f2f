"""Several operator replicas on one swarm, and replicas that come and go.

Only the holder of the swarm's Redis lease writes: the other replica's passes
change nothing, neither in Redis nor through the Kubernetes API.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from testsupport import kubelet as kl
from testsupport.kube import eventually, running_operator
from testsupport.node import RealKubelet as Kubelet
from testsupport.realcluster import RealCluster as Cluster
from testsupport.redis_server import RedisServer

from .conftest import swarm_spec
from .flows import choose, eid, fenced, pod_gone, replacement, running_seat

WRITES = {"create", "patch", "update", "delete"}


async def test_two_operators_one_acts_the_other_changes_nothing(
    cluster: Cluster, kubelet: Kubelet, redis_url: str
) -> None:
    # The placement off: whichever replica takes the lease keeps it, so this test sees one holder for
    # its whole run however long it takes (the planned handover is test_replicas_scale's subject).
    async with (
        running_operator(cluster, redis_url, operator_id="op-a", placement=False) as a,
        running_operator(cluster, redis_url, operator_id="op-b", placement=False) as b,
    ):
        await cluster.create_swarm("example", swarm_spec(interval=0.2))
        first = await running_seat(cluster, kubelet, "example")
        await kubelet.set_status(first["metadata"]["name"], kl.application_exit(1))
        await fenced(redis_url, "example", eid(first))
        assert choose(redis_url, "example", eid(first), "fresh")
        second = await replacement(cluster, "example", 2)
        await running_seat(cluster, kubelet, "example", generation=2)
        # Both replicas keep passing for a while with the seat settled.
        for memo in (a, b):
            await eventually(
                lambda m=memo: (cluster.namespace, "example") in m["passes"], what="both replicas pass"
            )
        await asyncio.sleep(1.0)
        passes = {m["config"].operator_id: m["passes"][(cluster.namespace, "example")] for m in (a, b)}
        last = {m["config"].operator_id: m["results"][(cluster.namespace, "example")] for m in (a, b)}

    leader = first["metadata"]["annotations"]["swarm.agentihooks.io/operator-id"]
    other = "op-b" if leader == "op-a" else "op-a"
    assert second["metadata"]["annotations"]["swarm.agentihooks.io/operator-id"] == leader
    assert {p["metadata"]["labels"]["swarm.agentihooks.io/controller-owner"] for p in (first, second)} == {
        "agentihooks-swarm-example"
    }
    assert passes[other].recovery.writes_applied == 0
    assert passes[leader].recovery.writes_applied > 0
    assert last[leader].leader and not last[other].leader
    other_calls = cluster.calls_by(f"agentihooks-operator/{other}")
    # At most the spec-validity condition, which every replica reports alike (and skips when present).
    assert not [c for c in other_calls if c[0] in WRITES and c[2] != "swarms/status"], other_calls
    leader_calls = cluster.calls_by(f"agentihooks-operator/{leader}")
    assert ("create", "", "pods") in leader_calls and ("delete", "", "pods") in leader_calls
    pods = await cluster.pods("example")
    assert [p["metadata"]["name"] for p in pods] == [second["metadata"]["name"]]
    assert cluster.count("create", "pods") == 2


async def test_pod_deleted_while_no_operator_ran_is_still_fenced(
    cluster: Cluster, kubelet: Kubelet, redis_url: str
) -> None:
    async with running_operator(cluster, redis_url, operator_id="op-a", lease_ms=1000):
        await cluster.create_swarm("example", swarm_spec(interval=0.2))
        first = await running_seat(cluster, kubelet, "example")
    await kubelet.delete(first["metadata"]["name"])  # nobody watching: no pass ever sees it go
    await eventually(lambda: pod_gone(cluster, eid(first)), what="the deleted Pod removed by its kubelet")
    async with running_operator(cluster, redis_url, operator_id="op-b", lease_ms=1000):
        record = await fenced(redis_url, "example", eid(first))
        assert record.reason == "node_lost"
        assert choose(redis_url, "example", eid(first), "fresh")
        await replacement(cluster, "example", 2)


async def test_redis_outage_is_retried_not_fatal(
    cluster: Cluster, kubelet: Kubelet, private_redis: RedisServer, tmp_path: Path
) -> None:
    async with running_operator(cluster, private_redis.url, operator_id="op-a"):
        await cluster.create_swarm("example", swarm_spec(interval=0.2))
        first = await running_seat(cluster, kubelet, "example")
        await eventually(lambda: _running(cluster), what="seat running")
        private_redis.stop()
        await kubelet.set_status(first["metadata"]["name"], kl.oom_killed())
        await asyncio.sleep(1.0)  # passes fail meanwhile and are retried
        private_redis.start()
        record = await fenced(private_redis.url, "example", eid(first))
        assert record.reason == "oom_killed"


async def _running(cluster: Cluster) -> bool:
    return ((await cluster.swarm("example")).get("status") or {}).get("running") == 1
