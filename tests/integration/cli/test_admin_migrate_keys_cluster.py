"""``agentihooks admin migrate-keys`` on a real three-primary Redis Cluster.

A move changes a key's slot there, which no transaction can span: each key is RESTOREd at its new
name and then DELeted at the old one, after the lease checks. Shown here: an earlier release's
name-only keys (written by its recovery core on the cluster) move and are read by the namespaced
core; a held lease refuses; a run cut after any step, even between the RESTORE and the DEL, is
finished by the next run with the same result.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from agentihooks_checkpoint.catalog import EmptyCatalog
from agentihooks_operator.cli.main import app
from agentihooks_operator.cli.migration import KeyMigration
from agentihooks_operator.recovery import Recovery
from agentihooks_operator.recovery.store.keys import SwarmKeys
from agentihooks_operator.recovery.store.layout import unmigrated
from agentihooks_operator.redisconn import connect
from testsupport.recovery import MemoryLauncher, swarm_spec
from typer.testing import CliRunner

SWARM, NS = "eng", "team-a"
MID = f"agentihooks:swarm:{{{SWARM}}}:"
NEW = f"agentihooks:swarm:{{{NS}/{SWARM}}}:"


@pytest.fixture
def client(redis_cluster: Any) -> Iterator[redis.Redis]:
    redis_cluster.flush()
    c = connect(redis_cluster.url)
    yield c
    c.close()


def cli(url: str, *args: str) -> Any:
    env = {"AGENTIHOOKS_REDIS_URL": url}
    return CliRunner().invoke(app, ["admin", "migrate-keys", SWARM, "-n", NS, *args], env=env)


def keys_of(client: redis.Redis) -> dict[str, tuple[bytes, int]]:
    """Every key's DUMP and whether it has a TTL (values compared whole, types and all)."""
    out: dict[str, tuple[bytes, int]] = {}
    for raw in client.scan_iter(match="agentihooks:swarm:*", count=1000):
        key = raw.decode()
        out[key] = (client.dump(key), int(client.pttl(key) > 0))
    return out


def write_earlier_release(client: redis.Redis) -> str:
    old = Recovery(client, SWARM, holder="op-old", catalog=EmptyCatalog(), launcher=MemoryLauncher())
    [plan] = old.ensure_seats(swarm_spec())
    old.report_session(plan.execution_id, "sess-1")
    old.release()
    client.hset(MID + "image-pull-since", plan.execution_id, 1000)
    client.pexpire(MID + "image-pull-since", 600_000)
    return plan.execution_id


def test_an_earlier_releases_keys_move_on_a_cluster(redis_cluster: Any, client: redis.Redis) -> None:
    eid = write_earlier_release(client)
    before = keys_of(client)
    dry = cli(redis_cluster.url)
    assert dry.exit_code == 0, dry.output
    assert keys_of(client) == before
    done = cli(redis_cluster.url, "--apply")
    assert done.exit_code == 0, done.output
    after = keys_of(client)
    assert not [k for k in after if k.startswith(MID)]
    assert {k.replace(NEW, MID): v for k, v in after.items()} == before  # values and TTLs kept
    assert 0 < client.pttl(NEW + "image-pull-since") <= 600_000
    assert unmigrated(client, "agentihooks") == []
    r = Recovery(
        client, SWARM, holder="op-new", catalog=EmptyCatalog(), launcher=MemoryLauncher(), namespace=NS
    )
    assert [a.execution_id for a in r.current_attempts()] == [eid]
    assert r.acquire() and r.epoch == 2
    r.release()
    assert "nothing to migrate" in cli(redis_cluster.url, "--apply").output


def test_a_held_lease_refuses_on_a_cluster(redis_cluster: Any, client: redis.Redis) -> None:
    write_earlier_release(client)
    old = Recovery(client, SWARM, holder="op-old-2", catalog=EmptyCatalog(), launcher=MemoryLauncher())
    assert old.acquire()
    before = keys_of(client)
    refused = cli(redis_cluster.url, "--apply")
    assert refused.exit_code == 1 and "op-old-2 (epoch 2)" in refused.output
    assert "Nothing was changed" in refused.output
    assert {k: v for k, v in keys_of(client).items() if not k.endswith("control-owner")} == {
        k: v for k, v in before.items() if not k.endswith("control-owner")
    }
    old.release()


def test_a_cut_after_any_step_or_between_restore_and_del_is_finished_by_the_next_run(
    redis_cluster: Any, client: redis.Redis
) -> None:
    write_earlier_release(client)
    saved = {k: (client.dump(k), max(client.pttl(k), 0)) for k in keys_of(client)}

    def fresh() -> KeyMigration:
        redis_cluster.flush()
        for key, (data, ttl) in saved.items():
            client.restore(key, ttl, data)
        return KeyMigration(client, SwarmKeys("agentihooks", SWARM, NS), cluster=True)

    steps = len(fresh().plan())
    assert cli(redis_cluster.url, "--apply").exit_code == 0
    finished = keys_of(client)
    assert steps > 5
    for cut in range(steps + 1):
        list(itertools.islice(fresh().apply(), cut))
        again = cli(redis_cluster.url, "--apply")
        assert again.exit_code == 0, (cut, again.output)
        assert keys_of(client) == finished, cut
    # Killed between the RESTORE at the new name and the DEL of the old: an identical copy under
    # both names, which the next run drops once.
    fresh()
    part = "attempt-records"
    client.restore(NEW + part, 0, client.dump(MID + part))
    again = cli(redis_cluster.url, "--apply")
    assert again.exit_code == 0, again.output
    assert f"dropped (identical copy kept): {MID}{part}" in again.output
    assert keys_of(client) == finished
