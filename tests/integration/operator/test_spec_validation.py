"""An invalid Swarm spec becomes a status condition and a permanent handler error; nothing launches."""

from __future__ import annotations

import asyncio

from testsupport.kube import Cluster, eventually, running_operator

from .conftest import swarm_spec


async def test_invalid_spec_sets_condition_and_launches_nothing(cluster: Cluster, redis_url: str) -> None:
    bad = swarm_spec()
    bad["harness"]["name"] = "gemini"
    bad["seats"][0]["name"] = "Not_A_Seat"
    async with running_operator(cluster, redis_url):
        await cluster.create_swarm("broken", bad)

        async def condition() -> dict | None:
            conds = (await cluster.swarm("broken")).get("status", {}).get("conditions") or []
            return next((c for c in conds if c["type"] == "SpecValid"), None)

        cond = await eventually(condition, what="SpecValid condition")
        assert cond["status"] == "False"
        assert "harness.name" in cond["message"]
        assert "seats.0.name" in cond["message"]
        await asyncio.sleep(1.0)  # a few pass intervals: still nothing may launch
        assert await cluster.pods() == []
        assert cluster.count("create", "pods") == 0


async def test_fixing_the_spec_starts_the_swarm(cluster: Cluster, redis_url: str) -> None:
    bad = swarm_spec()
    bad["recovery"]["passIntervalSeconds"] = 0
    async with running_operator(cluster, redis_url):
        await cluster.create_swarm("later", bad)

        async def valid(expected: str) -> bool:
            conds = (await cluster.swarm("later")).get("status", {}).get("conditions") or []
            return any(c["type"] == "SpecValid" and c["status"] == expected for c in conds)

        await eventually(lambda: valid("False"), what="SpecValid False")
        r = await cluster.http.patch(
            "/apis/agentihooks.io/v1alpha1/namespaces/default/swarms/later",
            json={"spec": {"recovery": {"passIntervalSeconds": 0.3}}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        r.raise_for_status()
        await eventually(lambda: valid("True"), what="SpecValid True after the fix")
        pods = await eventually(lambda: cluster.pods("later"), what="first Pod after the fix")
        assert len(pods) == 1
