"""The operator refuses to start over an earlier release's name-only keys, naming the command to run.

An operator that started over ``<root>:swarm:{<name>}:...`` would not see the attempts recorded
there and would launch every seat again beside Pods that still run. On the real control plane:
with such keys in Redis the operator process exits non-zero, says which swarm and which command,
and creates nothing; once ``migrate-keys`` moved them, it starts and takes the recorded attempt as its
own (its Pod is gone here, so it is fenced), never admitting the seat again.
"""

from __future__ import annotations

from pathlib import Path

import redis
from agentihooks_checkpoint.catalog import EmptyCatalog
from agentihooks_operator.cli.main import app
from agentihooks_operator.recovery import Recovery
from agentihooks_operator.recovery.store.keys import SwarmKeys
from agentihooks_operator.recovery.store.layout import unmigrated
from testsupport.kube import eventually, operator_process
from testsupport.node import RealKubelet as Kubelet
from testsupport.realcluster import RealCluster as Cluster
from testsupport.recovery import MemoryLauncher
from testsupport.recovery import swarm_spec as core_spec
from typer.testing import CliRunner

from .conftest import swarm_spec

GEN = "swarm.agentihooks.io/generation"


async def test_name_only_keys_stop_the_operator_until_migrated(
    cluster: Cluster, kubelet: Kubelet, redis_url: str, tmp_path: Path
) -> None:
    client = redis.Redis.from_url(redis_url)
    earlier = Recovery(client, "example", holder="op-old", catalog=EmptyCatalog(), launcher=MemoryLauncher())
    [plan] = earlier.ensure_seats(core_spec())  # an earlier release admitted the seat (its Pod is gone here)
    earlier.release()
    await cluster.create_swarm("example", swarm_spec(interval=0.3))
    async with operator_process(cluster, redis_url, tmp_path, operator_id="op-a") as proc:
        code = await eventually(lambda: proc.poll() is not None and proc.returncode, timeout=60, what="exit")
        assert code != 0
    log = (tmp_path / "op-a.log").read_text()
    assert "refusing to start: Redis holds swarms under the name-only keys of an earlier release" in log
    assert "agentihooks admin migrate-keys <name> -n <namespace>" in log and ": example." in log
    assert await cluster.pods("example") == [], "nothing was launched"
    assert cluster.count("create", "pods") == 0

    env = {"AGENTIHOOKS_REDIS_URL": redis_url}
    moved = CliRunner().invoke(
        app, ["admin", "migrate-keys", "example", "-n", cluster.namespace, "--apply"], env=env
    )
    assert moved.exit_code == 0, moved.output
    keys = SwarmKeys("agentihooks", "example", cluster.namespace)
    async with operator_process(cluster, redis_url, tmp_path, operator_id="op-b") as proc:
        # The earlier release's attempt is this operator's own: its Pod is gone, so it is fenced
        # (a recovery of the seat), never admitted again as a new generation 1.
        await eventually(
            lambda: client.hget(keys.attempt_fences, plan.execution_id), timeout=60, what="fence"
        )
        assert proc.poll() is None
        records = {k.decode() for k in client.hkeys(keys.attempt_records)}
        assert plan.execution_id in records
        gen1 = [p for p in await cluster.pods("example") if p["metadata"]["labels"][GEN] == "1"]
        assert gen1 == [] and cluster.count("create", "pods") == 0
    assert unmigrated(client, "agentihooks") == []
    client.close()
