"""``Ready`` on a real API server: True for a looked-after Swarm (kstatus Current, the printer column),
False with ``RedisUnavailable`` while Redis is down, True again once it is back; one write per change."""

from __future__ import annotations

import asyncio
from typing import Any

from testsupport.kstatus import status_of
from testsupport.kube import eventually, running_operator
from testsupport.realcluster import RealCluster as Cluster
from testsupport.redis_server import RedisServer

from .conftest import swarm_spec


async def _ready(cluster: Cluster, name: str) -> dict[str, Any]:
    conds = ((await cluster.swarm(name)).get("status") or {}).get("conditions") or []
    return next((c for c in conds if c["type"] == "Ready"), {})


async def test_ready_follows_redis(cluster: Cluster, private_redis: RedisServer) -> None:
    await cluster.create_swarm("example", swarm_spec(interval=0.3))
    async with running_operator(cluster, private_redis.url):

        async def reconciled() -> bool:
            got = await _ready(cluster, "example")
            return (got.get("status"), got.get("reason")) == ("True", "Reconciled")

        await eventually(reconciled, what="Ready True")
        swarm = await cluster.swarm("example")
        assert status_of(swarm) == "Current"
        assert (await cluster.columns("example"))["Ready"] == "True"
        assert (await _ready(cluster, "example"))["observedGeneration"] == swarm["metadata"]["generation"]
        # A quiet Swarm is not rewritten by its passes (about seven of them in two seconds).
        before = swarm["metadata"]["resourceVersion"]
        await asyncio.sleep(2.0)
        assert (await cluster.swarm("example"))["metadata"]["resourceVersion"] == before

        private_redis.stop()
        try:

            async def down() -> dict[str, Any] | None:
                got = await _ready(cluster, "example")
                return got if got.get("reason") == "RedisUnavailable" else None

            cond = await eventually(down, timeout=60, what="Ready False: RedisUnavailable")
            assert cond["status"] == "False" and cond["message"].startswith("Redis cannot be reached: ")
            assert status_of(await cluster.swarm("example")) == "InProgress"
            assert (await cluster.columns("example"))["Ready"] == "False"
        finally:
            private_redis.start()
        await eventually(reconciled, timeout=60, what="Ready True once Redis is back")
        assert status_of(await cluster.swarm("example")) == "Current"
