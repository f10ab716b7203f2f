"""A Pod event starts a pass at once; the timer is only the fallback."""

from __future__ import annotations

from testsupport import kubelet as kl
from testsupport.kube import eventually, running_operator
from testsupport.node import RealKubelet as Kubelet
from testsupport.realcluster import RealCluster as Cluster

from .conftest import swarm_spec
from .flows import eid, fence, running_seat


async def test_pod_event_triggers_a_pass_long_before_the_timer(
    cluster: Cluster, kubelet: Kubelet, redis_url: str
) -> None:
    async with running_operator(cluster, redis_url):
        await cluster.create_swarm("example", swarm_spec(interval=600))
        first = await running_seat(cluster, kubelet, "example")
        await kubelet.set_status(first["metadata"]["name"], kl.evicted())
        # The timer would next fire in ten minutes; only the Pod event can make this pass.
        record = await eventually(lambda: fence(redis_url, "example", eid(first)), timeout=15, what="fence")
        assert record.reason == "evicted"
