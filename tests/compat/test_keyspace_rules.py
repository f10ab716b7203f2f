"""The Redis keyspace and records shared with the original (COMPAT.md, "Redis keyspace", "Records").

Each test names its rule (``KEYSPACE-<n>``, listed in docs/compatibility.md). Real
redis-server; the original's keys are written by hand, then moved with
``agentihooks admin migrate-keys`` (typer's CliRunner) and read by the recovery core.
"""

from __future__ import annotations

import json

import redis
from agentihooks_operator.cli.main import app
from agentihooks_operator.recovery import Recovery
from agentihooks_operator.recovery.store.keys import ORIGINAL_KEYSPACE, SCRIPT_PARTS, SwarmKeys
from agentihooks_operator.recovery.store.records import ControlOwner, Heartbeat
from testsupport.recovery import MemoryLauncher, observe, swarm_spec
from typer.testing import CliRunner

SWARM = "swarm-a"
AGENT_RECORD = json.dumps({"agent": "eng-1", "execution_id": "exe-orig", "account": "acct-1"})


def test_keyspace_1_original_part_names_under_the_root_with_the_slug_hash_tagged() -> None:
    """KEYSPACE-1: <root>:swarm:<slug>:<part> with the original's part names; the slug is hash-tagged."""
    keys = SwarmKeys("team-root", SWARM)
    assert keys.control_owner == "team-root:swarm:{swarm-a}:control-owner"
    assert keys.unbraced("heartbeats") == "team-root:swarm:swarm-a:heartbeats"
    for part in ("control-owner", "control-epoch", "attempt-fences", "attempt-recoveries", "recovery-paused"):
        assert part in SCRIPT_PARTS and part in ORIGINAL_KEYSPACE
    assert keys.image_pull_since == keys.braced("image-pull-since")
    # What the operator uses today: the tag carries the namespace as well (one slot per Swarm still).
    namespaced = SwarmKeys("team-root", SWARM, "team-a")
    assert namespaced.control_owner == "team-root:swarm:{team-a/swarm-a}:control-owner"
    assert namespaced.unbraced("heartbeats") == keys.unbraced("heartbeats")  # the original's names


def test_keyspace_2_this_products_attempt_records_never_go_under_executions(redis_url: str) -> None:
    """KEYSPACE-2: ``executions`` holds the original's AgentRecord; ours are stored as ``attempt-records``."""
    client = redis.Redis.from_url(redis_url)
    r = Recovery(client, SWARM, holder="op-a", catalog=None, launcher=MemoryLauncher())  # type: ignore[arg-type]
    client.hset(r.keys.braced("executions"), "exe-orig", AGENT_RECORD)
    spec = swarm_spec()
    [first] = r.ensure_seats(spec)
    r.reconcile(spec, observe([(first.execution_id, "eng-1", 1)], failed={first.execution_id: "oom_killed"}))
    assert "executions" not in SCRIPT_PARTS and r.keys.attempt_records.endswith(":attempt-records")
    assert client.hgetall(r.keys.braced("executions")) == {b"exe-orig": AGENT_RECORD.encode()}
    assert json.loads(client.hget(r.keys.attempt_records, first.execution_id))["state"] == "fenced"
    client.close()


def test_keyspace_3_the_originals_keys_once_migrated_are_read_by_the_recovery_core(redis_url: str) -> None:
    """KEYSPACE-3: once migrated, the epoch continues, the pause holds, session-less heartbeats read."""
    client = redis.Redis.from_url(redis_url)
    old = SwarmKeys("agentihooks", SWARM).unbraced
    client.set(old("control-epoch"), 41)
    client.set(old("recovery-paused"), 41)
    client.hset(old("heartbeats"), "exe-orig", json.dumps({"archive_watermark": 125, "at_ms": 17}))
    client.hset(old("executions"), "exe-orig", AGENT_RECORD)
    env = {"AGENTIHOOKS_REDIS_URL": redis_url}
    done = CliRunner().invoke(app, ["admin", "migrate-keys", SWARM, "-n", "default", "--apply"], env=env)
    assert done.exit_code == 0, done.output

    r = Recovery(client, SWARM, holder="op-a", catalog=None, launcher=MemoryLauncher(), namespace="default")  # type: ignore[arg-type]
    assert r.acquire() and r.epoch == 42  # the fencing token continues past the original's
    owner = ControlOwner.model_validate_json(client.get(r.keys.control_owner))
    assert (owner.owner, owner.epoch) == ("op-a", 42) and owner.expires_at > 0
    assert r.paused()
    beat = Heartbeat.model_validate_json(client.hget(r.keys.heartbeats, "exe-orig"))
    assert beat.session_id is None and beat.archive_watermark == 125
    assert client.hget(r.keys.braced("executions"), "exe-orig") == AGENT_RECORD.encode()
    assert client.keys(old("*")) == []
    client.close()


def test_keyspace_4_migrate_keys_refuses_while_the_originals_controller_holds_the_lease(
    redis_url: str,
) -> None:
    """KEYSPACE-4: the move never runs under a live controller; the refusal names the holder."""
    client = redis.Redis.from_url(redis_url)
    old = SwarmKeys("agentihooks", SWARM).unbraced
    client.set(
        old("control-owner"), json.dumps({"owner": "orig-ctl", "epoch": 5, "expires_at": 9}), px=30_000
    )
    client.hset(old("heartbeats"), "exe-orig", "{}")
    out = CliRunner().invoke(
        app,
        ["admin", "migrate-keys", SWARM, "-n", "default", "--apply"],
        env={"AGENTIHOOKS_REDIS_URL": redis_url},
    )
    assert out.exit_code == 1 and "orig-ctl (epoch 5)" in out.output
    assert client.hget(old("heartbeats"), "exe-orig") == b"{}"
    client.close()
