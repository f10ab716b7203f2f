"""What makes the recovery core run on a Redis Cluster, checked on a real three-primary one.

The whole recovery suite also runs on the cluster (``[cluster]`` in this
folder's conftest); these tests check the reasons it can: every key of a swarm
is in one hash slot (so each script and pipeline is single-slot), Redis itself
refuses a script spanning two swarms, and a swarm whose slot moves to another
primary mid-recovery is followed there (MOVED) by the product's client.
"""

from __future__ import annotations

import json

import pytest
from agentihooks_checkpoint.stores.local import LocalStore
from agentihooks_operator.recovery import Recovery
from agentihooks_operator.recovery.store.keys import OUTSIDE_PARTS, SCRIPT_PARTS, SwarmKeys
from agentihooks_operator.redisconn import connect
from redis.cluster import RedisCluster
from redis.exceptions import ClusterCrossSlotError, MovedError, RedisClusterException
from testsupport.recovery import MemoryLauncher, observe, swarm_spec
from testsupport.redis_cluster import RedisClusterProcesses


def slot(cluster: RedisClusterProcesses, key: str) -> int:
    with cluster.admin(0) as c:
        return int(c.execute_command("CLUSTER", "KEYSLOT", key))


def two_swarms_on_one_node(cluster: RedisClusterProcesses) -> tuple[SwarmKeys, SwarmKeys, int]:
    """Two swarms in different slots served by the same primary (so only the slot rule refuses)."""
    a = SwarmKeys("agentihooks", "swarm-a")
    node = cluster.owner_of(a.seats)
    for i in range(1000):
        b = SwarmKeys("agentihooks", f"swarm-{i}")
        if slot(cluster, b.seats) != slot(cluster, a.seats) and cluster.owner_of(b.seats) == node:
            return a, b, node
    raise AssertionError("no second swarm on the same primary")


def test_every_key_of_a_swarm_is_in_the_swarms_one_slot(redis_cluster: RedisClusterProcesses) -> None:
    keys = SwarmKeys("agentihooks", "swarm-a")
    every = [keys.part(p) for p in SCRIPT_PARTS] + [keys.braced(p) for p in OUTSIDE_PARTS]
    every.append(keys.api_uploads("exe-1"))
    assert len(every) == len(SCRIPT_PARTS) + len(OUTSIDE_PARTS) + 1
    assert {slot(redis_cluster, k) for k in every} == {slot(redis_cluster, "{swarm-a}")}
    assert slot(redis_cluster, SwarmKeys("agentihooks", "swarm-b").seats) != slot(redis_cluster, keys.seats)


def test_a_script_over_two_swarms_is_refused_crossslot(redis_cluster: RedisClusterProcesses) -> None:
    redis_cluster.flush()
    a, b, node = two_swarms_on_one_node(redis_cluster)
    script = "redis.call('HSET', KEYS[1], 'x', '1'); redis.call('HSET', KEYS[2], 'x', '1'); return 1"
    with redis_cluster.admin(node) as c:  # the very node serving both slots
        with pytest.raises(ClusterCrossSlotError):  # the server's CROSSSLOT reply
            c.eval(script, 2, a.seats, b.seats)
        assert c.eval(script, 2, a.seats, a.recovery_work) == 1, "one swarm's keys: accepted"
        assert not c.exists(b.seats), "the refused script wrote nothing"
    client = connect(redis_cluster.url)
    with pytest.raises(RedisClusterException, match="same key slot"):
        client.eval(script, 2, a.seats, b.seats)  # the client refuses it before sending
    client.close()


def test_recovery_follows_its_swarm_moved_to_another_primary(
    redis_cluster: RedisClusterProcesses, store: LocalStore, launcher: MemoryLauncher, checkpoint
) -> None:  # type: ignore[no-untyped-def]
    redis_cluster.flush()
    client = connect(redis_cluster.url)
    assert isinstance(client, RedisCluster)
    spec = swarm_spec(1)
    r = Recovery(client, "swarm-a", holder="ctl-a", catalog=store, launcher=launcher)
    plan = r.ensure_seats(spec)[0]
    r.report_session(plan.execution_id, "sess-1")
    checkpoint(plan.execution_id, session_id="sess-1", task_id=plan.task_id)
    source = redis_cluster.owner_of(r.keys.seats)
    target = (source + 1) % len(redis_cluster.nodes)
    assert client.get_node_from_key(r.keys.seats).port == redis_cluster.nodes[source].port

    # The slot moves between the admission and the failure; the client still has the old topology.
    redis_cluster.migrate_slot(r.keys.seats, source, target)
    assert redis_cluster.owner_of(r.keys.seats, asking=source) == target
    with redis_cluster.admin(source) as old, pytest.raises(MovedError):
        old.hgetall(r.keys.seats)
    report = r.reconcile(
        spec, observe([(plan.execution_id, "eng-1", 1)], failed={plan.execution_id: "oom_killed"})
    )

    assert report.fenced == [plan.execution_id] and len(report.launches) == 1
    new = report.launches[0]
    assert launcher.created[new] == 1
    assert client.get_node_from_key(r.keys.seats).port == redis_cluster.nodes[target].port, "MOVED followed"
    with redis_cluster.admin(target) as c:  # every write of the recovery landed on the new owner
        assert json.loads(c.hget(r.keys.attempt_fences, plan.execution_id))["released"] == [
            "grant",
            "account",
        ]
        assert c.hget(r.keys.seats, "eng-1").decode() == new
    m = r.metrics()
    assert m["fences_by_reason:oom_killed"] == 1 and m["admissions:replacement"] == 1
    client.close()
