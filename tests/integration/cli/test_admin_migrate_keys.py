"""``agentihooks admin migrate-keys``: old keys to the namespaced hash-tagged ones, on a real Redis.

Through typer's CliRunner against the session's redis-server. Keys are written as the
original writes them (``<root>:swarm:<slug>:<part>``), by hand, or as an earlier release of
this product wrote them (``<root>:swarm:{<slug>}:<part>``), by its recovery core.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import yaml
from agentihooks_operator.cli.main import app
from agentihooks_operator.recovery import Recovery
from agentihooks_operator.recovery.store.layout import unmigrated
from click.testing import Result
from testsupport.recovery import MemoryLauncher, swarm_spec
from typer.testing import CliRunner

SWARM = "eng"
NS = "team-a"
OLD = f"agentihooks:swarm:{SWARM}:"
#: An earlier release's name-only layout.
MID = f"agentihooks:swarm:{{{SWARM}}}:"
NEW = f"agentihooks:swarm:{{{NS}/{SWARM}}}:"


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


def cli(redis_url: str, *args: str) -> Result:
    env = {"AGENTIHOOKS_REDIS_URL": redis_url, "AGENTIHOOKS_SWARM_KEY_PREFIX": "agentihooks"}
    return CliRunner().invoke(app, ["admin", "migrate-keys", SWARM, "-n", NS, *args], env=env)


def snapshot(client: redis.Redis) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in sorted(client.keys("*")):
        kind = client.type(key).decode()
        value: Any = {
            "string": client.get,
            "hash": client.hgetall,
            "list": lambda k: client.lrange(k, 0, -1),
            "set": client.smembers,
        }[kind](key)
        out[key.decode()] = (kind, value)
    return out


def write_original(client: redis.Redis) -> None:
    """A swarm the original ran: its epoch, pause, fences, heartbeats, grants, AgentRecords and more."""
    client.set(OLD + "control-epoch", 7)
    client.set(OLD + "recovery-paused", 7)
    client.hset(OLD + "attempt-fences", "exe-a", json.dumps({"execution_id": "exe-a", "reason": "evicted"}))
    client.hset(OLD + "heartbeats", "exe-b", json.dumps({"archive_watermark": 12, "at_ms": 1}))
    client.hset(OLD + "launch-grants", "exe-b", json.dumps({"grant_id": "lgr-1", "state": "active"}))
    client.hset(OLD + "executions", "exe-b", json.dumps({"agent": "eng-1", "execution_id": "exe-b"}))
    client.hset(OLD + "image-pull-since", "exe-b", 1000)
    client.pexpire(OLD + "image-pull-since", 600_000)
    client.hset(OLD + "attempt-nodes", "exe-b", "node-1")
    client.rpush(OLD + "tasks-log", "a", "b")  # a part recovery does not know: moved as it is


def test_dry_run_prints_the_plan_and_changes_nothing(redis_url: str, client: redis.Redis) -> None:
    write_original(client)
    before = snapshot(client)
    r = cli(redis_url)
    assert r.exit_code == 0, r.output
    assert "dry run" in r.output
    assert f"would move: {OLD}heartbeats -> {NEW}heartbeats (hash)" in r.output
    assert f"would move: {OLD}tasks-log -> {NEW}tasks-log (list)" in r.output
    assert f"would raise the epoch at: {OLD}control-epoch -> {NEW}control-epoch (0 -> 7)" in r.output
    assert "9 step(s) planned" in r.output
    assert snapshot(client) == before


def test_the_plan_as_a_document(redis_url: str, client: redis.Redis) -> None:
    """``-o json`` (and yaml): one document of the steps, the same the text lists; nothing changed."""
    write_original(client)
    before = snapshot(client)
    r = cli(redis_url, "-o", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["applied"] is False and doc["root"] == "agentihooks" and len(doc["steps"]) == 9
    moved = {(s["source"], s["target"]) for s in doc["steps"] if s["action"] == "move"}
    assert (f"{OLD}heartbeats", f"{NEW}heartbeats") in moved
    assert yaml.safe_load(cli(redis_url, "-o", "yaml").output) == doc
    assert snapshot(client) == before
    applied = json.loads(cli(redis_url, "--apply", "-o", "json").output)
    assert applied["applied"] is True and len(applied["steps"]) == 9
    assert json.loads(cli(redis_url, "--apply", "-o", "json").output)["steps"] == []  # nothing left


def test_apply_moves_every_key_keeping_values_and_ttls_and_twice_is_a_no_op(
    redis_url: str, client: redis.Redis
) -> None:
    write_original(client)
    before = snapshot(client)
    r = cli(redis_url, "--apply")
    assert r.exit_code == 0, r.output
    assert "9 step(s) applied" in r.output
    after = snapshot(client)
    assert not [k for k in after if k.startswith(OLD)]
    moved = {k.replace(OLD, NEW): v for k, v in before.items()}
    assert after == moved
    assert 0 < client.pttl(NEW + "image-pull-since") <= 600_000
    # The original's AgentRecords stay under its own part name; this product never reads them.
    assert json.loads(client.hget(NEW + "executions", "exe-b")) == {"agent": "eng-1", "execution_id": "exe-b"}

    again = cli(redis_url, "--apply")
    assert again.exit_code == 0, again.output
    assert "nothing to migrate" in again.output
    assert snapshot(client) == after


def test_refuses_while_the_originals_controller_holds_the_lease(redis_url: str, client: redis.Redis) -> None:
    write_original(client)
    client.set(
        OLD + "control-owner", json.dumps({"owner": "swarm-ctl-7f", "epoch": 7, "expires_at": 1}), px=60_000
    )
    before = snapshot(client)
    for args in ((), ("--apply",)):
        r = cli(redis_url, *args)
        assert r.exit_code == 1
        assert "swarm-ctl-7f (epoch 7)" in r.output and f"{OLD}control-owner" in r.output
        assert "Nothing was changed" in r.output
    assert snapshot(client) == before


def test_refuses_while_this_products_controller_holds_the_lease(redis_url: str, client: redis.Redis) -> None:
    write_original(client)
    recovery = Recovery(
        client, SWARM, holder="op-main-1", catalog=None, launcher=MemoryLauncher(), namespace=NS
    )  # type: ignore[arg-type]
    assert recovery.acquire()
    before = snapshot(client)
    r = cli(redis_url, "--apply")
    assert r.exit_code == 1 and "op-main-1 (epoch 1)" in r.output and f"{NEW}control-owner" in r.output
    assert snapshot(client) == before
    recovery.release()
    done = cli(redis_url, "--apply")
    assert done.exit_code == 0, done.output
    # The fencing token never goes back: the original's 7 wins over this product's 1.
    assert client.get(NEW + "control-epoch") == b"7"
    assert recovery.acquire() and recovery.epoch == 8


def test_an_expired_lease_record_without_ttl_is_dropped_not_obeyed(
    redis_url: str, client: redis.Redis
) -> None:
    client.set(OLD + "control-owner", json.dumps({"owner": "gone", "epoch": 3, "expires_at": 1}))
    client.set(OLD + "control-epoch", 3)
    r = cli(redis_url, "--apply")
    assert r.exit_code == 0, r.output
    assert f"dropped the expired lease record {OLD}control-owner" in r.output
    assert client.keys(OLD + "*") == [] and client.get(NEW + "control-epoch") == b"3"


def test_both_names_hold_data_identical_merged_kept_or_conflict(redis_url: str, client: redis.Redis) -> None:
    client.set(OLD + "recovery-paused", 4)
    client.set(NEW + "recovery-paused", 4)  # identical: the old copy goes
    client.hset(OLD + "heartbeats", mapping={"exe-a": "1", "exe-b": "2"})
    client.hset(NEW + "heartbeats", mapping={"exe-b": "2", "exe-c": "3"})  # agree on exe-b: merged
    client.set(OLD + "control-epoch", 2)
    client.set(NEW + "control-epoch", 9)  # the larger epoch stays
    client.hset(OLD + "attempt-fences", "exe-a", "theirs")
    client.hset(NEW + "attempt-fences", "exe-a", "ours")  # disagree: a conflict, both left alone
    r = cli(redis_url, "--apply")
    assert r.exit_code == 1
    assert "CONFLICT, left alone:" in r.output and "hash fields differ: exe-a" in r.output
    assert "1 conflict(s)" in r.output
    assert client.get(NEW + "recovery-paused") == b"4" and not client.exists(OLD + "recovery-paused")
    assert client.hgetall(NEW + "heartbeats") == {b"exe-a": b"1", b"exe-b": b"2", b"exe-c": b"3"}
    assert client.get(NEW + "control-epoch") == b"9" and not client.exists(OLD + "control-epoch")
    assert client.hget(OLD + "attempt-fences", "exe-a") == b"theirs"
    assert client.hget(NEW + "attempt-fences", "exe-a") == b"ours"


def test_attempt_records_of_an_earlier_build_move_out_of_executions(
    redis_url: str, client: redis.Redis
) -> None:
    """An earlier build stored its attempt records under ``executions``; they move to ``attempt-records``."""
    old = Recovery(client, SWARM, holder="op-old", catalog=None, launcher=MemoryLauncher())  # type: ignore[arg-type]
    [plan] = old.ensure_seats(swarm_spec())
    old.release()
    record = client.hget(MID + "attempt-records", plan.execution_id)
    client.delete(MID + "attempt-records")
    client.hset(MID + "executions", plan.execution_id, record)
    client.hset(OLD + "executions", "exe-b", json.dumps({"agent": "eng-1", "execution_id": "exe-b"}))
    out = cli(redis_url, "--apply")
    assert out.exit_code == 0, out.output
    assert "moved this product's attempt records to" in out.output
    assert client.hget(NEW + "attempt-records", plan.execution_id) == record
    assert client.hkeys(NEW + "executions") == [b"exe-b"]  # the original's record stays where it was
    r = Recovery(client, SWARM, holder="op-new", catalog=None, launcher=MemoryLauncher(), namespace=NS)  # type: ignore[arg-type]
    assert r.current_attempts()[0].execution_id == plan.execution_id


def test_bad_names_and_an_unreachable_redis_are_one_error_line(redis_url: str) -> None:
    bad = CliRunner().invoke(
        app, ["admin", "migrate-keys", "bad name", "-n", NS], env={"AGENTIHOOKS_REDIS_URL": redis_url}
    )
    assert bad.exit_code == 1 and "not a usable swarm name" in bad.output
    down = CliRunner().invoke(
        app, ["admin", "migrate-keys", SWARM, "-n", NS, "--redis-url", "redis://127.0.0.1:1/0"], env={}
    )
    assert down.exit_code == 3 and down.output.startswith("error: redis:")


def test_a_bad_url_is_refused_before_connecting() -> None:
    bad = CliRunner().invoke(
        app, ["admin", "migrate-keys", SWARM, "-n", NS, "--redis-url", "127.0.0.1:6379"], env={}
    )
    assert bad.exit_code == 1 and "AGENTIHOOKS_REDIS_URL: not a URL" in bad.output


# -- an earlier release's name-only keys (issue 22) -------------------------------------------------
def write_earlier_release(client: redis.Redis) -> str:
    """A swarm an earlier release ran under name-only keys: admitted, reported, lease released."""
    old = Recovery(client, SWARM, holder="op-old", catalog=None, launcher=MemoryLauncher())  # type: ignore[arg-type]
    [plan] = old.ensure_seats(swarm_spec())
    old.report_session(plan.execution_id, "sess-1")
    old.pause()
    old.release()
    return plan.execution_id


def namespaced(client: redis.Redis, holder: str = "op-new") -> Recovery:
    return Recovery(client, SWARM, holder=holder, catalog=None, launcher=MemoryLauncher(), namespace=NS)  # type: ignore[arg-type]


def test_an_earlier_releases_name_only_keys_move_and_are_read_by_the_namespaced_core(
    redis_url: str, client: redis.Redis
) -> None:
    eid = write_earlier_release(client)
    assert unmigrated(client, "agentihooks") == [SWARM]
    before = snapshot(client)
    dry = cli(redis_url)
    assert dry.exit_code == 0, dry.output
    assert f"swarm {NS}/{SWARM}" in dry.output
    assert f"would move: {MID}attempt-records -> {NEW}attempt-records (hash)" in dry.output
    assert snapshot(client) == before
    done = cli(redis_url, "--apply")
    assert done.exit_code == 0, done.output
    after = snapshot(client)
    assert not [k for k in after if k.startswith(MID)]
    assert {k.replace(NEW, MID): v for k, v in after.items()} == before
    assert unmigrated(client, "agentihooks") == []
    r = namespaced(client)
    assert [a.execution_id for a in r.current_attempts()] == [eid]
    assert r.paused()
    assert r.acquire() and r.epoch == 2  # the epoch continues from the earlier release's 1
    assert r.ensure_seats(swarm_spec()) == []  # the seat's attempt is known: nothing admitted again
    r.release()


def test_without_a_namespace_nothing_is_guessed_or_changed(redis_url: str, client: redis.Redis) -> None:
    write_earlier_release(client)
    before = snapshot(client)
    r = CliRunner().invoke(
        app, ["admin", "migrate-keys", SWARM, "--apply"], env={"AGENTIHOOKS_REDIS_URL": redis_url}
    )
    assert r.exit_code == 1
    assert f"agentihooks admin migrate-keys {SWARM} -n <namespace>" in r.output
    bad = CliRunner().invoke(
        app, ["admin", "migrate-keys", SWARM, "-n", "Team_A"], env={"AGENTIHOOKS_REDIS_URL": redis_url}
    )
    assert bad.exit_code == 1 and "not a usable namespace: 'Team_A'" in bad.output
    assert snapshot(client) == before


def test_refuses_while_an_earlier_release_holds_the_name_only_lease(
    redis_url: str, client: redis.Redis
) -> None:
    write_earlier_release(client)
    old = Recovery(client, SWARM, holder="op-old-2", catalog=None, launcher=MemoryLauncher())  # type: ignore[arg-type]
    assert old.acquire()
    before = snapshot(client)
    r = cli(redis_url, "--apply")
    assert r.exit_code == 1 and "op-old-2 (epoch 2)" in r.output and f"{MID}control-owner" in r.output
    assert snapshot(client) == before
    old.release()


def layouts_of(client: redis.Redis) -> dict[str, list[str]]:
    """Each part name → the layouts (old, mid, new) holding a key of it."""
    out: dict[str, list[str]] = {}
    for raw in client.keys("*"):
        key = raw.decode()
        for name, head in (("old", OLD), ("mid", MID), ("new", NEW)):
            if key.startswith(head):
                out.setdefault(key[len(head) :], []).append(name)
    return out


def test_a_migration_cut_after_any_step_leaves_each_key_under_one_name_and_finishes_when_run_again(
    redis_url: str, client: redis.Redis
) -> None:
    """Each step is one transaction: whichever step a kill stops after, every part is under exactly one
    layout, and running the command again ends where an uninterrupted run ends."""
    from agentihooks_operator.cli.migration import KeyMigration
    from agentihooks_operator.recovery.store.keys import SwarmKeys

    write_earlier_release(client)
    client.rpush(OLD + "tasks-log", "a", "b")  # and one part only the original wrote
    saved = {k: (client.dump(k), max(client.pttl(k), 0)) for k in client.keys("*")}

    def fresh() -> KeyMigration:
        client.flushdb()
        for key, (data, ttl) in saved.items():
            client.restore(key, ttl, data)
        return KeyMigration(client, SwarmKeys("agentihooks", SWARM, NS))

    steps = len(fresh().plan())
    cli(redis_url, "--apply")
    finished = snapshot(client)
    assert steps > 10 and not layouts_of(client).keys() - {
        p for p, w in layouts_of(client).items() if w == ["new"]
    }
    for cut in range(steps + 1):
        migration = fresh()
        list(itertools.islice(migration.apply(), cut))  # the process dies after ``cut`` steps
        for part, where in layouts_of(client).items():
            assert len(where) == 1, (cut, part, where)
        again = cli(redis_url, "--apply")
        assert again.exit_code == 0, (cut, again.output)
        assert snapshot(client) == finished, cut


def test_kill_9_mid_migration_leaves_each_key_under_one_name_and_a_second_run_finishes(
    redis_url: str, client: redis.Redis
) -> None:
    """The real command, killed with SIGKILL while it moves thousands of keys, then run again."""
    write_earlier_release(client)
    for i in range(3000):  # an upload set per execution: enough keys for the kill to land mid-way
        client.sadd(f"{MID}api-uploads:exe-{i:032x}", "d")
    total = len(client.keys("*"))
    command = [
        shutil.which("agentihooks") or "agentihooks",
        "admin",
        "migrate-keys",
        SWARM,
        "-n",
        NS,
        "--apply",
    ]
    env = {
        **os.environ,
        "AGENTIHOOKS_REDIS_URL": redis_url,
        "AGENTIHOOKS_SWARM_KEY_PREFIX": "agentihooks",
        "PYTHONUNBUFFERED": "1",
    }
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    for _ in range(200):  # until it has moved some keys (its output says so), then kill -9
        line = proc.stdout.readline()
        if b"moved:" in line:
            break
    proc.kill()
    proc.wait(timeout=10)
    where = layouts_of(client)
    assert all(len(w) == 1 for w in where.values())
    assert len(client.keys("*")) == total  # nothing lost, nothing copied twice
    moved = sum(1 for w in where.values() if w == ["new"])
    again = subprocess.run(command, env=env, capture_output=True, timeout=300, check=False)
    assert again.returncode == 0, again.stdout.decode()
    assert all(w == ["new"] for w in layouts_of(client).values())
    assert len(client.keys("*")) == total
    assert 0 < moved < len(where), "the kill landed mid-way"
