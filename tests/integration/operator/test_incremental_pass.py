"""Incremental passes on the real control plane: a pass reads the Pods the watch changed, not a list.

The swarm's Pods reach each pass through kopf's watch (``k8s/podcache.py``);
the Pods are listed in full only on the first pass, after a new lease epoch,
after the watch restarted, and every 60 s. The audit log counts the Pod and
Node lists the operator's own client made (kopf's watch has its own user
agent): quiet passes and a failure seen in a Pod event list nothing; an event
the cache missed is made good by the periodic full list; a Node that stops
being Ready is still found by the periodic Node list.
"""

from __future__ import annotations

from typing import Any

from agentihooks_operator.k8s.observing.podcache import RESYNC_S
from testsupport import kubelet as kl
from testsupport.kube import eventually, running_operator
from testsupport.node import RealKubelet as Kubelet
from testsupport.realcluster import RealCluster as Cluster

from .conftest import swarm_spec
from .flows import NODE, choose, eid, fence, fenced, replacement, running_seat

AGENT = "agentihooks-operator/op-a"


def lists(cluster: Cluster, resource: str) -> int:
    """How often the operator's own client (not kopf's watch) listed ``resource``."""
    return cluster.calls_by(AGENT).count(("list", "", resource))


async def status_is(cluster: Cluster, **expected: object) -> bool:
    status = (await cluster.swarm("example")).get("status") or {}
    return all(status.get(k) == v for k, v in expected.items())


async def passes(memo: Any, key: tuple[str, str], n: int) -> None:
    """Wait until ``n`` more passes of the swarm ended."""
    seen: list[object] = [memo["results"].get(key)]

    def more() -> bool:
        current = memo["results"].get(key)
        if current is not seen[-1]:
            seen.append(current)
        return len(seen) > n

    await eventually(more, timeout=30, what=f"{n} more passes")


async def test_a_failure_in_a_pod_event_is_recovered_without_listing_the_pods(
    cluster: Cluster, kubelet: Kubelet, redis_url: str
) -> None:
    key = (cluster.namespace, "example")
    async with running_operator(cluster, redis_url) as memo:
        await cluster.create_swarm("example", swarm_spec(interval=0.3))
        first = await running_seat(cluster, kubelet, "example")
        await eventually(lambda: status_is(cluster, running=1), what="the seat seen running")
        before = lists(cluster, "pods")
        assert before >= 1, "the first pass lists the Pods"
        await passes(memo, key, 5)  # quiet passes read the cache
        # A lost node the Pod reports itself: no fast path takes it, a pass does, from the event.
        await kubelet.set_status(first["metadata"]["name"], kl.node_lost_status())
        record = await fenced(redis_url, "example", eid(first))
        assert record.reason == "node_lost"
        await eventually(lambda: status_is(cluster, running=0, awaitingDecision=1), what="awaiting decision")
        await passes(memo, key, 3)
        assert lists(cluster, "pods") == before, "no pass listed the Pods: the watch told them"


async def test_an_event_the_cache_missed_is_made_good_by_the_periodic_full_list(
    cluster: Cluster, kubelet: Kubelet, redis_url: str
) -> None:
    key = (cluster.namespace, "example")
    async with running_operator(cluster, redis_url) as memo:
        await cluster.create_swarm("example", swarm_spec(interval=0.3))
        first = await running_seat(cluster, kubelet, "example")
        name, lost = first["metadata"]["name"], eid(first)
        await eventually(lambda: status_is(cluster, running=1), what="the seat seen running")
        cache = memo["podcaches"][key]
        feed = cache.feed
        cache.feed = lambda kind, body: None  # the watch's events stop reaching the cache
        await kubelet.delete(name)
        await eventually(lambda: _gone(cluster, name), what="the Pod deleted on the API server")
        await passes(memo, key, 5)
        assert fence(redis_url, "example", lost) is None, "the cache missed the deletion"
        before = lists(cluster, "pods")
        cache.feed = feed
        real = cache._clock
        cache._clock = lambda: real() + RESYNC_S  # the resync period has run out
        record = await fenced(redis_url, "example", lost)
        assert record.reason == "node_lost"  # a Pod that vanished is lost
        assert lists(cluster, "pods") > before, "found by a full list"


async def test_a_pod_the_watch_has_not_delivered_yet_is_read_not_taken_for_lost(
    cluster: Cluster, kubelet: Kubelet, redis_url: str
) -> None:
    """A replacement's Pod exists on the API server but its ADDED event has not reached the cache
    (held back here for good): the pass reads that Pod by name instead of calling it gone."""
    key = (cluster.namespace, "example")
    async with running_operator(cluster, redis_url) as memo:
        await cluster.create_swarm("example", swarm_spec(interval=0.3))
        first = await running_seat(cluster, kubelet, "example")
        await eventually(lambda: status_is(cluster, running=1), what="the seat seen running")
        await kubelet.set_status(first["metadata"]["name"], kl.node_lost_status())
        await fenced(redis_url, "example", eid(first))
        await eventually(lambda: status_is(cluster, awaitingDecision=1), what="awaiting decision")
        memo["podcaches"][key].feed = lambda kind, body: None  # no event reaches the cache any more
        assert choose(redis_url, "example", eid(first), "fresh")
        second = await replacement(cluster, "example", 2)
        await passes(memo, key, 5)
        assert fence(redis_url, "example", eid(second)) is None, "a Pod that exists is not lost"
        assert ("get", "", "pods") in cluster.calls_by(AGENT)


async def test_a_node_that_is_not_ready_is_found_by_the_periodic_node_list(
    cluster: Cluster, kubelet: Kubelet, redis_url: str
) -> None:
    """No Pod event tells it: only the Node changed (its Ready condition), which nobody watches."""
    key = (cluster.namespace, "example")
    async with running_operator(cluster, redis_url, node_lost_after_seconds=4) as memo:
        await cluster.create_swarm("example", swarm_spec(interval=0.3))
        first = await running_seat(cluster, kubelet, "example")
        await eventually(lambda: status_is(cluster, running=1), what="the seat seen running")
        await passes(memo, key, 3)
        pods_before, nodes_before = lists(cluster, "pods"), lists(cluster, "nodes")
        await kubelet.put_node(NODE, ready="False", since=kl.long_ago(60))
        record = await fenced(redis_url, "example", eid(first))
        assert record.reason == "node_lost"
        assert lists(cluster, "nodes") > nodes_before
        assert lists(cluster, "pods") == pods_before
        await kubelet.put_node(NODE)  # Ready again for whatever runs next


async def _gone(cluster: Cluster, name: str) -> bool:
    return await cluster.get(f"/api/v1/namespaces/{cluster.namespace}/pods/{name}") is None
