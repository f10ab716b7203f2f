"""Three operator processes share 30 swarms; one is SIGKILLed, one joins (docs/operations.md,
"Several replicas").

On the real control plane with the chart's RBAC, each replica a process of its own:

* every swarm is held by exactly one replica, the one the placement prefers (rendezvous hashing
  over the live replicas); with these names and ids that is 12/9/9 of 30, each inside 5..15;
* ``kill -9`` of one replica: each of its swarms is taken over by the survivor the placement now
  prefers, with its epoch increased by exactly 1, and no other swarm's epoch moves;
* a seat of a taken-over swarm fails: exactly one replacement Pod;
* a fourth replica joins: it ends up holding the swarms it is preferred for (8 of 30, about a
  third of three), each moved once (epoch + 1), the others untouched;
* through it all, no Pod is created twice (the API server's audit log).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import redis
from agentihooks_operator.k8s.placement import preferred
from agentihooks_operator.recovery.store.keys import SwarmKeys
from testsupport import kubelet as kl
from testsupport.kube import eventually, operator_process
from testsupport.node import RealKubelet as Kubelet
from testsupport.realcluster import RealCluster as Cluster

from .conftest import swarm_spec
from .flows import choose, eid, fenced, replacement, running_seat

pytestmark = pytest.mark.slow
NAMES = [f"sw-{i:02d}" for i in range(30)]
ENV = {"AGENTIHOOKS_PLACEMENT_HEARTBEAT_SECONDS": "0.5", "AGENTIHOOKS_PLACEMENT_HOLD_SECONDS": "2"}


#: Every swarm of this test lives in the cluster's namespace (set by the test before any key is read).
NAMESPACE: list[str] = []


def _key(name: str) -> str:
    return SwarmKeys("agentihooks", name, NAMESPACE[0]).control_owner


def _plan(replicas: list[str]) -> dict[str, str]:
    return {n: str(preferred(_key(n), replicas)) for n in NAMES}


def _owners(client: redis.Redis) -> dict[str, str | None]:
    raws = client.mget([_key(n) for n in NAMES])
    return {n: (json.loads(raw)["owner"] if raw else None) for n, raw in zip(NAMES, raws, strict=True)}


def _epochs(client: redis.Redis) -> dict[str, int]:
    raws = client.mget([SwarmKeys("agentihooks", n, NAMESPACE[0]).control_epoch for n in NAMES])
    return {n: int(raw or 0) for n, raw in zip(NAMES, raws, strict=True)}


def _live(client: redis.Redis) -> set[str]:
    return {m.decode().partition(" ")[2] for m in client.zrange("agentihooks:{operators}:beats", 0, -1)}


async def test_three_replicas_share_thirty_swarms_survive_a_kill_and_spread_to_a_fourth(
    cluster: Cluster, kubelet: Kubelet, redis_url: str, tmp_path: Path
) -> None:
    NAMESPACE[:] = [cluster.namespace]
    client = redis.Redis.from_url(redis_url)
    first_plan = _plan(["op-a", "op-b", "op-c"])
    # The keys carry the test's (random) namespace, so the split differs per run; each replica has some.
    assert set(first_plan.values()) == {"op-a", "op-b", "op-c"}

    def replica(name: str) -> contextlib.AbstractAsyncContextManager[Any]:
        return operator_process(cluster, redis_url, tmp_path, operator_id=name, lease_ms=2000, extra_env=ENV)

    async with replica("op-a"), replica("op-b") as b, replica("op-c"):
        await eventually(
            lambda: _live(client) == {"op-a", "op-b", "op-c"}, timeout=30, what="3 replicas live"
        )
        await asyncio.sleep(1.5)  # every replica settled (two beats) in every view before the swarms exist
        for name in NAMES:
            await cluster.create_swarm(name, swarm_spec(interval=5.0))
        await eventually(
            lambda: _owners(client) == first_plan, timeout=45, what="each swarm with its replica"
        )

        async def one_pod_each() -> bool:
            return Counter(
                p["metadata"]["labels"]["swarm.agentihooks.io/swarm"] for p in await cluster.pods()
            ) == (Counter(NAMES))

        await eventually(one_pod_each, timeout=45, what="one Pod per swarm")
        victim = sorted(n for n, o in first_plan.items() if o == "op-b")
        seat = await running_seat(cluster, kubelet, victim[0])  # a seat of op-b's, to fail after the kill
        before = _epochs(client)

        b.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        second_plan = _plan(["op-a", "op-c"])
        await eventually(lambda: _owners(client) == second_plan, timeout=30, what="op-b's swarms taken over")
        print(
            f"\ntakeover of op-b's {len(victim)} swarms after kill -9: {time.monotonic() - killed_at:.1f} s"
        )
        after = _epochs(client)
        assert {n for n in NAMES if second_plan[n] != first_plan[n]} == set(victim)
        assert {n: after[n] - before[n] for n in NAMES} == {n: int(n in victim) for n in NAMES}

        await kubelet.set_status(seat["metadata"]["name"], kl.application_exit(1))
        await fenced(redis_url, victim[0], eid(seat))
        assert choose(redis_url, victim[0], eid(seat), "fresh")
        second = await replacement(cluster, victim[0], 2)
        assert [p["metadata"]["name"] for p in await cluster.pods(victim[0])] == [second["metadata"]["name"]]

        third_plan = _plan(["op-a", "op-c", "op-d"])
        moved = {n for n in NAMES if third_plan[n] != second_plan[n]}
        assert moved == {n for n in NAMES if third_plan[n] == "op-d"} and moved
        before_d = _epochs(client)
        async with replica("op-d"):
            await eventually(lambda: _owners(client) == third_plan, timeout=30, what="op-d holding its share")
            after_d = _epochs(client)
            assert {n: after_d[n] - before_d[n] for n in NAMES} == {n: int(n in moved) for n in NAMES}
            spread = Counter(third_plan.values())
            print(
                f"spread of 30 swarms: 3 replicas {dict(Counter(first_plan.values()))}, after the kill "
                f"{dict(Counter(second_plan.values()))}, with op-d {dict(spread)}"
            )

    # 30 first attempts and one replacement: nothing was created twice, whoever held the swarm
    assert cluster.count("create", "pods") == len(NAMES) + 1
    assert cluster.count("create", "pods", f"swarm-{eid(second)}") == 1
