"""One end-to-end scenario per failure reason: failure → fence → decision → exactly one replacement.

The real operator runs against the real control plane and the real Redis; the
kubelet fixture applies each failure the way a cluster reports it: container
states through the status subresource, evictions through the Eviction API,
and node loss by a kubelet that stops renewing its Lease (kube-controller-
manager's node lifecycle controller marks the Node NotReady, taints it and
evicts its Pods, which stay Terminating on the silent node). With no
checkpoint store every failure waits for a decision; the test records the
choice the way the CLI does, and the operator applies it on its next pass.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from agentihooks_checkpoint.directive import Continuity
from testsupport import kubelet as kl
from testsupport.kube import eventually, running_operator
from testsupport.node import RealKubelet as Kubelet
from testsupport.realcluster import RealCluster as Cluster

from .conftest import swarm_spec
from .flows import (
    NODE,
    choose,
    eid,
    fence,
    fenced,
    has_events,
    launch_record,
    pod_deleted,
    replacement,
    running_seat,
)

Failure = Callable[[Kubelet, str], Awaitable[None]]


def _status(doc: Callable[[], dict]) -> Failure:
    async def apply(kubelet: Kubelet, pod: str) -> None:
        await kubelet.set_status(pod, doc())

    return apply


async def _delete_node(kubelet: Kubelet, pod: str) -> None:
    await kubelet.delete_node(NODE)


async def _node_silent(kubelet: Kubelet, pod: str) -> None:
    await kubelet.put_node(NODE, ready="Unknown")


async def _evict(kubelet: Kubelet, pod: str) -> None:
    await kubelet.evict(pod)


async def _delete_pod(kubelet: Kubelet, pod: str) -> None:
    await kubelet.delete(pod)


SCENARIOS: list[tuple[str, Failure, str]] = [
    ("oom-137", _status(kl.oom_killed), "oom_killed"),
    ("oom-exit-0-succeeded", _status(lambda: kl.oom_killed(exit_code=0, phase="Succeeded")), "oom_killed"),
    ("evicted", _status(kl.evicted), "evicted"),
    ("eviction-api", _evict, "evicted"),
    ("node-lost", _status(kl.node_lost_status), "node_lost"),
    ("node-deleted", _delete_node, "node_lost"),
    ("node-silent-taint-eviction", _node_silent, "node_lost"),
    ("application-exit", _status(lambda: kl.application_exit(70)), "application_exit"),
    ("pod-deleted", _delete_pod, "node_lost"),
]


@pytest.mark.parametrize(("apply", "reason"), [s[1:] for s in SCENARIOS], ids=[s[0] for s in SCENARIOS])
async def test_failure_is_fenced_and_replaced_once(
    cluster: Cluster, kubelet: Kubelet, redis_url: str, apply: Failure, reason: str
) -> None:
    async with running_operator(cluster, redis_url):
        await cluster.create_swarm("example", swarm_spec())
        first = await running_seat(cluster, kubelet, "example")
        lost = eid(first)
        await eventually(lambda: _status_is(cluster, running=1), what="status running=1")

        await apply(kubelet, first["metadata"]["name"])

        record = await fenced(redis_url, "example", lost)
        assert record.reason == reason
        assert record.generation == 1
        released = await eventually(
            lambda: (
                (f := fence(redis_url, "example", lost)) is not None and f.released == ["grant", "account"]
            ),
            what="both releases recorded in the fence",
        )
        assert released
        await eventually(lambda: pod_deleted(cluster, lost), what="fenced Pod deleted")
        await eventually(lambda: _status_is(cluster, awaitingDecision=1), what="awaiting decision")
        swarm = await cluster.swarm("example")
        card = swarm["status"]["handoffs"][0]
        assert card["seat"] == "eng-1" and card["reason"].startswith(reason)
        assert card["binding"] == "awaiting decision"
        await has_events(cluster, "Swarm", "example", {"Fenced"})
        await has_events(cluster, "Pod", first["metadata"]["name"], {"Fenced"})
        assert [p for p in await cluster.pods("example")] == []  # nothing launched on its own

        assert choose(redis_url, "example", lost, "fresh")
        second = await replacement(cluster, "example", 2)
        launch = await launch_record(cluster, eid(second))
        assert launch.authority.generation == 2
        assert launch.authority.seat_id == "eng-1"
        assert launch.restore is not None and launch.restore.recovery is Continuity.FRESH
        assert launch.registration is not None and launch.registration.compatibility_key == "2.1.0"
        assert await cluster.get(
            f"/api/v1/namespaces/{cluster.namespace}/secrets/swarm-{eid(second)}-credential"
        )
        await running_seat(cluster, kubelet, "example", generation=2)
        await eventually(
            lambda: _status_is(cluster, running=1, awaitingDecision=0), what="replacement running"
        )
        await has_events(cluster, "Swarm", "example", {"Replaced"})

    pods = await cluster.pods("example")
    assert [(p["metadata"]["name"]) for p in pods] == [second["metadata"]["name"]]
    assert cluster.count("create", "pods", f"swarm-{eid(second)}") == 1
    assert cluster.count("create", "pods") == 2


async def _status_is(cluster: Cluster, **expected: object) -> bool:
    status = (await cluster.swarm("example")).get("status") or {}
    return all(status.get(k) == v for k, v in expected.items())
