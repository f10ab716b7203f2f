"""``agentihooks-operator --log-format json`` on a real API server: every line is one JSON object, and
kopf's lines and ours about a Swarm both name it under ``object`` (the line kopf wrote for a failed
handler named no Swarm in text before)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from testsupport.kube import eventually, operator_process
from testsupport.realcluster import RealCluster as Cluster
from testsupport.redis_server import RedisServer

from .conftest import swarm_spec

ENTRY = [sys.executable, "-m", "agentihooks_operator.main", "--standalone", "--log-format", "json"]


def _lines(path: Path) -> list[dict[str, Any]]:
    """The log's complete lines: the operator may be half-way through writing the last one."""
    text = path.read_text() if path.exists() else ""
    whole = text[: text.rfind("\n") + 1]
    return [json.loads(line) for line in whole.splitlines() if line.strip()]


async def test_json_lines_name_the_swarm(
    cluster: Cluster, private_redis: RedisServer, tmp_path: Path
) -> None:
    bad = swarm_spec()
    bad["checkpointStore"] = {"claim": "orphan"}  # admitted by the schema, refused by the operator
    await cluster.create_swarm("broken", bad)
    await cluster.create_swarm("example", swarm_spec(interval=0.3))
    log = tmp_path / "op-json.log"
    async with operator_process(cluster, private_redis.url, tmp_path, operator_id="op-json", command=ENTRY):

        def permanent() -> dict[str, Any] | None:
            return next((e for e in _lines(log) if "failed permanently" in e["message"]), None)

        line = await eventually(permanent, what="kopf's line for the refused spec")
        assert line["object"]["name"] == "broken" and line["object"]["namespace"] == cluster.namespace
        assert line["object"]["kind"] == "Swarm" and line["severity"] == "error"
        assert f"swarm {cluster.namespace}/broken:" in line["message"]

        async def reconciled() -> bool:
            conds = ((await cluster.swarm("example")).get("status") or {}).get("conditions") or []
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)

        await eventually(reconciled, what="the healthy Swarm reconciled")
        private_redis.stop()
        try:

            def failed() -> dict[str, Any] | None:
                said = f"recovery pass of {cluster.namespace}/example failed"
                return next((e for e in _lines(log) if e["message"].startswith(said)), None)

            ours = await eventually(failed, timeout=60, what="our line for the failed pass")
        finally:
            private_redis.start()
        assert ours["object"]["name"] == "example" and ours["severity"] == "warn"
        assert ours["logger"].startswith("agentihooks_operator")
    # Nothing else was written in another shape: every line parsed, and each has the three fields.
    every = _lines(log)
    assert every and all({"message", "severity", "timestamp", "logger"} <= set(e) for e in every)
