"""A failed attempt's recovery starts on its own Pod event, with no pass (real control plane, real Redis).

The swarm's pass interval is ten minutes, and the pipeline does not wake the
daemon before the recovery is done. Other Pod events may still start a pass at
any moment (a watch that re-lists delivers every Pod again), and such a pass
could reach the failed Pod first: from the failure until the replacement exists
the test holds every pass at a gate before it starts, so the replacement can
only come from the event-driven path (``memo["pipeline"]`` counts what it
recovered). The
fenced Pod's deletion went out beside the launch and the journal shows both
``ok``; the pass the pipeline then wakes publishes the Swarm's status.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterator
from typing import Any

import redis
from agentihooks_operator.recovery.store.keys import SwarmKeys
from testsupport import kubelet as kl
from testsupport.kube import eventually, running_operator
from testsupport.node import MERGE
from testsupport.node import RealKubelet as Kubelet
from testsupport.realcluster import RealCluster as Cluster

from .conftest import swarm_spec
from .flows import eid, fence, replacement, running_seat

LEGACY = {"swarm.agentihooks.io/superseded": "legacy-specification"}


async def test_a_failure_is_replaced_from_its_pod_event_alone(
    cluster: Cluster, kubelet: Kubelet, redis_url: str
) -> None:
    client = redis.Redis.from_url(redis_url)
    keys = SwarmKeys("agentihooks", "example", cluster.namespace)
    async with running_operator(cluster, redis_url) as memo:
        await cluster.create_swarm("example", swarm_spec(interval=600))
        spawn = await eventually(lambda: cluster.pods("example"), what="the spawn's Pod")
        lost, name = eid(spawn[0]), spawn[0]["metadata"]["name"]
        path = f"/api/v1/namespaces/{cluster.namespace}/pods/{name}"
        # superseded as a legacy specification: automation replaces it fresh, nobody has to choose
        r = await cluster.http.patch(path, json={"metadata": {"annotations": LEGACY}}, headers=MERGE)
        r.raise_for_status()
        await running_seat(cluster, kubelet, "example")
        # the passes the Running Pod's events started are over: no pass runs from here on
        await eventually(lambda: _status(cluster, running=1), what="the Running Pod's pass")
        await eventually(lambda: _quiet(memo, (cluster.namespace, "example")), what="the daemon idle")
        with _passes_held(memo["passes"][(cluster.namespace, "example")]) as held:
            await kubelet.set_status(name, kl.oom_killed())
            second = await replacement(cluster, "example", 2)
            # every pass waits at the gate, so only the event-driven path can have launched it; the
            # Pod is created inside recover_one and the count goes up once that returned: wait for it
            await eventually(
                lambda: memo["pipeline"].recovered == 1,
                what=f"the event-driven path's count ({held[0]} passes held)",
            )
        record = fence(redis_url, "example", lost)
        assert (
            record is not None and record.reason == "oom_killed" and record.released == ["grant", "account"]
        )
        await eventually(lambda: _gone(cluster, path), what="the fenced Pod deleted beside the launch")
        journal = json.loads(client.hget(keys.attempt_journal, lost))
        assert journal["retire"]["status"] == "ok" and journal["decide"]["status"] == "ok"
        assert json.loads(client.hget(keys.attempt_journal, eid(second)))["launch"]["status"] == "ok"
        assert client.hlen(keys.recovery_work) == 0
        await running_seat(cluster, kubelet, "example", generation=2)  # its Secret exists
        await eventually(lambda: _status(cluster, running=1, awaitingDecision=0), what="status published")
    assert cluster.count("create", "pods") == 2
    assert cluster.count("create", "secrets", f"swarm-{eid(second)}-credential") == 1
    client.close()


@contextlib.contextmanager
def _passes_held(runner: Any) -> Iterator[list[int]]:
    """Every pass of ``runner`` that starts inside waits at a gate (holding nothing: no lease step,
    no Redis write) until the block ends; yields the count of passes held so far."""
    gate, held, run = threading.Event(), [0], runner.run

    def gated(*args: Any, **kwargs: Any) -> Any:
        if not gate.is_set():
            held[0] += 1
            gate.wait(120)
        return run(*args, **kwargs)

    runner.run = gated
    try:
        yield held
    finally:
        gate.set()
        runner.run = run


async def _quiet(memo: Any, key: tuple[str, str], polls: int = 10) -> bool:
    """No pass running and none due, for ``polls`` checks 50 ms apart."""
    for _ in range(polls):
        if memo["triggers"][key].is_set() or not memo["passes"][key]._idle.is_set():
            return False
        await asyncio.sleep(0.05)
    return True


async def _gone(cluster: Cluster, path: str) -> bool:
    return await cluster.get(path) is None


async def _status(cluster: Cluster, **expected: object) -> bool:
    status = (await cluster.swarm("example")).get("status") or {}
    return all(status.get(k) == v for k, v in expected.items())
