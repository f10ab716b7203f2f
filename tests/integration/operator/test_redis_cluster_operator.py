"""The real operator on a real Redis Cluster (``redis+cluster://``), on the real control plane.

The recovery core's suite runs on a cluster too (tests/integration/recovery);
this checks the rest of the operator does: its replica heartbeats, control-API
endpoint records, image-pull bookkeeping and the pass's reads, all through the
cluster client. An OOM-killed seat is fenced, both releases recorded, and the
decision recorded the way the CLI records it gives exactly one replacement.
"""

from __future__ import annotations

from agentihooks_checkpoint.catalog import EmptyCatalog
from agentihooks_operator.recovery import Recovery
from agentihooks_operator.recovery.store.keys import SwarmKeys
from agentihooks_operator.recovery.store.records import FenceRecord
from agentihooks_operator.redisconn import connect
from testsupport import kubelet as kl
from testsupport.kube import eventually, running_operator
from testsupport.node import RealKubelet as Kubelet
from testsupport.realcluster import RealCluster as Cluster
from testsupport.recovery import MemoryLauncher
from testsupport.redis_cluster import RedisClusterProcesses

from .conftest import swarm_spec
from .flows import eid, replacement, running_seat


async def test_the_operator_fences_and_replaces_once_on_a_redis_cluster(
    cluster: Cluster, kubelet: Kubelet, redis_cluster: RedisClusterProcesses
) -> None:
    redis_cluster.flush()
    client = connect(redis_cluster.url)
    keys = SwarmKeys("agentihooks", "example", cluster.namespace)

    def fence(execution_id: str) -> FenceRecord | None:
        raw = client.hget(keys.attempt_fences, execution_id)
        return FenceRecord.model_validate_json(raw) if raw else None

    try:
        async with running_operator(cluster, redis_cluster.url):
            await cluster.create_swarm("example", swarm_spec())
            first = await running_seat(cluster, kubelet, "example")
            lost = eid(first)
            await kubelet.set_status(first["metadata"]["name"], kl.oom_killed())
            await eventually(
                lambda: (f := fence(lost)) is not None and f.released == ["grant", "account"],
                what="fence with both releases, in the cluster",
            )
            assert fence(lost).reason == "oom_killed"  # type: ignore[union-attr]
            cli = Recovery(
                client,
                "example",
                holder="cli",
                catalog=EmptyCatalog(),
                launcher=MemoryLauncher(),
                namespace=cluster.namespace,
            )
            assert cli.record_request(lost, "fresh", "operator")
            second = await replacement(cluster, "example", 2)
            await running_seat(cluster, kubelet, "example", generation=2)
        assert cluster.count("create", "pods", f"swarm-{eid(second)}") == 1
        assert cluster.count("create", "pods") == 2
        assert client.hget(keys.seats, "eng-1").decode() == eid(second)
    finally:
        client.close()
