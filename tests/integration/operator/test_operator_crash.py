"""The operator process SIGKILLed in the middle of a recovery, then replaced by another replica.

Whatever step the kill interrupts, the next lease holder finishes the
recovery with exactly one replacement Pod, one fence and one release of each
kind: journalled steps that completed are never sent again, and the launch
whose outcome is unknown is observed (GET the Pod) before anything is resent.

The swarm's pass interval is 2 s, so the failure is taken by the event-driven
path (:mod:`agentihooks_operator.k8s.pipeline`) the moment its Pod event
arrives, not by a pass. Two recoveries are killed at every write step:

* ``choice``: no checkpoint, so the attempt waits for a decision; its fenced
  Pod is deleted before the decision record is written; a recorded ``fresh``
  choice then launches the replacement (killed at the launch's points);
* ``auto``: a spawn superseded as a legacy specification is replaced fresh by
  automation in one go: fence, releases, decision, then the replacement's
  Secret and Pod created together while the fenced Pod is deleted
  beside them, both marked ``ok`` by one script afterwards.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
import redis
from agentihooks_operator.recovery.store.keys import SwarmKeys
from testsupport import kubelet as kl
from testsupport.kube import eventually, operator_process
from testsupport.node import MERGE
from testsupport.node import RealKubelet as Kubelet
from testsupport.realcluster import RealCluster as Cluster

from .conftest import swarm_spec
from .flows import choose, eid, fence, fenced, launch_record, replacement, running_seat

# (kill point, which occurrence, how the seat continues): launch points fire once for generation 1.
POINTS = [
    ("after:fence", 1, "choice"),
    ("after:release_grant", 1, "choice"),
    ("before:retire", 1, "choice"),
    ("before:launch", 2, "choice"),
    ("after:launch", 2, "choice"),
    ("after:release_account", 1, "auto"),
    ("after:decide", 1, "auto"),
    ("before:retire", 1, "auto"),
    ("after:retire", 1, "auto"),
    ("after:launch", 2, "auto"),
]
LEGACY = {"swarm.agentihooks.io/superseded": "legacy-specification"}


@pytest.mark.parametrize(("point", "nth", "mode"), POINTS, ids=[f"{m}-{p}" for p, _, m in POINTS])
async def test_killed_mid_recovery_then_taken_over(
    cluster: Cluster, kubelet: Kubelet, redis_url: str, tmp_path: Path, point: str, nth: int, mode: str
) -> None:
    client = redis.Redis.from_url(redis_url)
    keys = SwarmKeys("agentihooks", "example", cluster.namespace)
    await cluster.create_swarm("example", swarm_spec(interval=2.0))
    async with operator_process(
        cluster, redis_url, tmp_path, operator_id="op-a", kill_at=point, kill_at_nth=nth
    ) as a:
        first = await running_seat(cluster, kubelet, "example")
        lost = eid(first)
        if mode == "auto":
            path = f"/api/v1/namespaces/{cluster.namespace}/pods/{first['metadata']['name']}"
            r = await cluster.http.patch(path, json={"metadata": {"annotations": LEGACY}}, headers=MERGE)
            r.raise_for_status()
        await kubelet.set_status(first["metadata"]["name"], kl.oom_killed())
        if nth == 2 and mode == "choice":  # the kill point is in the replacement's launch: choose fresh
            await fenced(redis_url, "example", lost)
            assert choose(redis_url, "example", lost, "fresh")
        await eventually(lambda: a.poll() is not None, timeout=90, what=f"operator killed at {point}")
        assert a.returncode == -signal.SIGKILL
    assert f"SIGKILL at {point}" in (tmp_path / "op-a.log").read_text()

    async with operator_process(cluster, redis_url, tmp_path, operator_id="op-b"):
        record = await fenced(redis_url, "example", lost)
        if nth == 1 and mode == "choice":
            await eventually(lambda: _awaiting(cluster), what="awaiting decision after takeover")
            assert choose(redis_url, "example", lost, "fresh")
        second = await replacement(cluster, "example", 2)
        await running_seat(cluster, kubelet, "example", generation=2)
        await eventually(lambda: _status(cluster, running=1, awaitingDecision=0), what="replacement running")
        await eventually(lambda: _work_done(client, keys), what="no recovery work left open")
        launch = await launch_record(cluster, eid(second))
        assert launch.authority.generation == 2
        owner = json.loads(client.get(keys.control_owner))
        assert owner["owner"] == "op-b" and owner["epoch"] == 2

    record = fence(redis_url, "example", lost)
    assert record is not None and record.reason == "oom_killed"
    assert record.superseded_legacy is (mode == "auto")
    assert record.released == ["grant", "account"]
    assert _fence_events(client, keys, lost) == 1, "fenced once"
    assert client.hget(keys.account_slots, lost) == b"ended"
    assert json.loads(client.hget(keys.launch_grants, lost))["state"] == "revoked"
    journal = json.loads(client.hget(keys.attempt_journal, lost))
    assert {s: journal[s]["status"] for s in ("fence", "retire", "decide")} == dict.fromkeys(
        ("fence", "retire", "decide"), "ok"
    )
    assert json.loads(client.hget(keys.attempt_journal, eid(second)))["launch"]["status"] == "ok"
    assert (
        await cluster.get(f"/api/v1/namespaces/{cluster.namespace}/pods/{first['metadata']['name']}") is None
    )
    pods = await cluster.pods("example")
    assert [p["metadata"]["name"] for p in pods] == [second["metadata"]["name"]]
    # what the API server created: a create cut off by the kill made nothing (its 500 is not a Pod)
    assert cluster.created("pods", f"swarm-{eid(second)}") == 1
    assert cluster.created("pods") == 2, "one Pod per generation"
    assert client.get(keys.control_owner) is None, "op-b gave the lease up when it stopped"
    assert int(client.get(keys.control_epoch)) == 2
    client.close()


def _fence_events(client: redis.Redis, keys: SwarmKeys, execution_id: str) -> int:
    entries = client.xrange(keys.recovery_events)
    return sum(
        1 for _, e in entries if e[b"type"] == b"fence" and e[b"execution_id"] == execution_id.encode()
    )


def _work_done(client: redis.Redis, keys: SwarmKeys) -> bool:
    return not client.hlen(keys.recovery_work)


async def _awaiting(cluster: Cluster) -> bool:
    cards = ((await cluster.swarm("example")).get("status") or {}).get("handoffs") or []
    return bool(cards) and cards[0]["binding"] == "awaiting decision"


async def _status(cluster: Cluster, **expected: object) -> bool:
    status = (await cluster.swarm("example")).get("status") or {}
    return all(status.get(k) == v for k, v in expected.items())
