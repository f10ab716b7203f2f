"""Recovery on a primary + replica under three real Sentinels, through ``redis+sentinel://``.

With ``WAIT 1`` after each guarded write (``AGENTIHOOKS_REDIS_WAIT_REPLICAS=1``),
everything the recovery acted on is on the replica too: SIGKILL the primary in
the middle of a recovery, let Sentinel promote the replica, and the recovery
completes there with no acknowledged fence, release or decision lost and no
replacement launched twice. A replica that stops acknowledging (SIGSTOP) turns
writes into unknown outcomes that the next pass re-observes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from agentihooks_checkpoint.stores.local import LocalStore
from agentihooks_operator.recovery import Recovery
from agentihooks_operator.recovery.errors import RecoveryError
from agentihooks_operator.recovery.store.durable import (
    Durability,
    NotReplicated,
    attach,
    attached,
    run_script,
)
from agentihooks_operator.recovery.store.keys import SwarmKeys
from agentihooks_operator.redisconn import connect
from testsupport.counting import CountingConnection, counted
from testsupport.recovery import MemoryLauncher, dump_keys, observe, swarm_spec
from testsupport.redis_sentinel import RedisSentinelProcesses

SEATS = 4
WAIT = Durability(replicas=1, timeout_ms=2000)


@pytest.fixture
def sentinel(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[RedisSentinelProcesses]:
    """Three Sentinels (a failover needs a quorum); ``@pytest.mark.parametrize("sentinel", [1],
    indirect=True)`` for one, when the test never fails over (it starts faster)."""
    processes = RedisSentinelProcesses(tmp_path / "sentinel", sentinels=getattr(request, "param", 3))
    try:
        processes.start()
        yield processes
    finally:
        processes.stop()


def failed_pass(r: Recovery, spec, plans) -> None:  # type: ignore[no-untyped-def]
    r.reconcile(
        spec,
        observe(
            [(p.execution_id, p.seat, 1) for p in plans], failed={p.execution_id: "oom_killed" for p in plans}
        ),
    )


def until_recovered(r: Recovery, client: redis.Redis, spec, plans, launcher: MemoryLauncher) -> int:  # type: ignore[no-untyped-def]
    """Passes (retrying while the primary is away) until every seat's replacement is launched."""
    errors = 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            failed_pass(r, spec, plans)
            if (
                client.hlen(r.keys.attempt_recoveries) == len(plans)
                and client.hlen(r.keys.recovery_work) == 0
            ):
                return errors
        except (RecoveryError, redis.RedisError):
            errors += 1
        time.sleep(0.1)
    raise AssertionError(f"recovery did not complete; launcher calls: {launcher.calls}")


def test_primary_killed_mid_recovery_loses_nothing_acknowledged(
    sentinel: RedisSentinelProcesses, store: LocalStore, launcher: MemoryLauncher, checkpoint
) -> None:  # type: ignore[no-untyped-def]
    client = connect(sentinel.url, durability=WAIT)
    spec = swarm_spec(SEATS)
    r0 = Recovery(client, "swarm-a", holder="ctl-a", catalog=store, launcher=launcher)
    plans = r0.ensure_seats(spec)
    for p in plans:  # each seat resumes natively from a checkpoint of its own: a replacement each
        r0.report_session(p.execution_id, f"sess-{p.seat}")
        checkpoint(p.execution_id, session_id=f"sess-{p.seat}", task_id=p.task_id)
    acknowledged: dict[bytes, object] = {}
    fences = [0]

    def kill_after_second_fence(point: str) -> None:
        if point == "after:fence":
            fences[0] += 1
            if fences[0] == 2:  # two fences (with their releases pending) acknowledged: kill now
                acknowledged.update(dump_keys(client))
                sentinel.kill_primary()

    r = Recovery(
        client, "swarm-a", holder="ctl-a", catalog=store, launcher=launcher, faults=kill_after_second_fence
    )
    assert r.acquire()
    errors = until_recovered(r, client, spec, plans, launcher)
    assert errors >= 1, "the primary's loss was seen by the recovery"
    assert sentinel.promoted() is not None, "Sentinel promoted a replica"

    # Nothing acknowledged before the kill is missing or changed on the promoted replica.
    k = r.keys
    before_fences = acknowledged[k.attempt_fences.encode()]
    assert isinstance(before_fences, dict) and len(before_fences) == 2
    for eid, raw in before_fences.items():
        was, now = json.loads(raw), json.loads(client.hget(k.attempt_fences, eid))
        assert (
            now["fenced_at_ms"] == was["fenced_at_ms"] and now["controller_epoch"] == was["controller_epoch"]
        )
        assert set(was["released"]) <= set(now["released"])
    for part in (k.attempt_recoveries, k.seats, k.launch_grants, k.account_slots):
        for field, value in (acknowledged.get(part.encode()) or {}).items():  # type: ignore[union-attr]
            assert client.hexists(part, field), f"{part} {field!r} was acknowledged, then lost"
            if part == k.attempt_recoveries:
                assert client.hget(part, field) == value

    # Exactly once: one fence, both releases, one decision and one replacement launched once per seat.
    m = r.metrics()
    assert client.hlen(k.attempt_fences) == SEATS and m["fences_by_reason:oom_killed"] == SEATS
    for p in plans:
        fence = json.loads(client.hget(k.attempt_fences, p.execution_id))
        assert sorted(fence["released"]) == ["account", "grant"]
    assert m["releases:grant"] == SEATS and m["releases:account"] == SEATS
    decisions = [json.loads(v) for v in client.hvals(k.attempt_recoveries)]
    assert {d["mode"] for d in decisions} == {"resume"}
    replacements = [d["replacement"] for d in decisions]
    assert len(set(replacements)) == SEATS and m["admissions:replacement"] == SEATS
    for new in replacements:
        assert launcher.created[new] == 1 and launcher.calls.count(("launch", new)) == 1
    assert client.hlen(k.attempt_records) == 2 * SEATS
    assert sorted(launcher.pods) == sorted(replacements), "every fenced Pod retired, only replacements left"
    client.close()


@pytest.mark.parametrize("sentinel", [1], indirect=True)
def test_a_write_no_replica_confirms_is_an_unknown_outcome_redone_once(
    sentinel: RedisSentinelProcesses,
    store: LocalStore,
    launcher: MemoryLauncher,
    caplog: pytest.LogCaptureFixture,
    checkpoint,  # type: ignore[no-untyped-def]
) -> None:
    client = connect(sentinel.url, durability=Durability(replicas=1, timeout_ms=300))
    spec = swarm_spec(1)
    r0 = Recovery(client, "swarm-a", holder="ctl-a", catalog=store, launcher=launcher)
    plan = r0.ensure_seats(spec)[0]
    r0.report_session(plan.execution_id, "sess-1")
    checkpoint(plan.execution_id, session_id="sess-1", task_id=plan.task_id)
    frozen: list[str] = []

    def freeze_before_fence(point: str) -> None:
        if point == "before:fence" and not frozen:  # the lease is renewed: the fence is the first write
            frozen.append(point)
            sentinel.freeze_replicas()

    r = Recovery(
        client, "swarm-a", holder="ctl-a", catalog=store, launcher=launcher, faults=freeze_before_fence
    )
    try:
        failed_pass(r, spec, [plan])  # the pass logs the step's failure and goes on
        assert frozen and "0 of 1 replicas" in caplog.text
        assert client.hexists(r.keys.attempt_fences, plan.execution_id), "the primary ran the fence"
        assert client.hlen(r.keys.attempt_recoveries) == 0, "nothing acted on the unconfirmed fence"
        assert list(launcher.created) == [plan.execution_id] and not launcher.retired
    finally:
        sentinel.thaw_replicas()
    sentinel.wait_replicated()
    until_recovered(r, client, spec, [plan], launcher)
    m = r.metrics()
    assert client.hlen(r.keys.attempt_fences) == 1 and m["fences_by_reason:oom_killed"] == 1
    assert m["releases:grant"] == 1 and m["releases:account"] == 1
    new = json.loads(client.hget(r.keys.attempt_recoveries, plan.execution_id))["replacement"]
    assert launcher.created[new] == 1 and launcher.calls.count(("launch", new)) == 1
    client.close()


@pytest.mark.parametrize("sentinel", [1], indirect=True)
def test_wait_rides_in_the_round_trip_of_its_write(
    sentinel: RedisSentinelProcesses,
    store: LocalStore,
    launcher: MemoryLauncher,
    checkpoint,  # type: ignore[no-untyped-def]
) -> None:
    """The same failed attempt costs the same round trips, counted at the connection, with and
    without ``WAIT 1`` (database 0 without, 1 with, on the primary): the WAIT is pipelined."""
    spec = swarm_spec(1)
    trips: dict[int, int] = {}
    for db, durability in ((0, None), (1, WAIT)):
        client = counted(f"redis://127.0.0.1:{sentinel.primary.port}/{db}")
        attach(client, durability)
        r = Recovery(client, "swarm-a", holder="ctl-a", catalog=store, launcher=launcher)
        eid = r.ensure_seats(spec)[0].execution_id
        r.report_session(eid, "sess-1")
        checkpoint(eid, session_id="sess-1")
        r.reconcile(spec, observe([(eid, "eng-1", 1)]))
        r.load_scripts()  # as a warm controller has them
        before = CountingConnection.sent
        report = r.reconcile(spec, observe([(eid, "eng-1", 1)], failed={eid: "oom_killed"}))
        trips[db] = CountingConnection.sent - before
        assert report.fenced == [eid] and len(report.launches) == 1
        assert attached(client) == durability
        client.close()
    assert trips[1] == trips[0], (
        f"round trips of one failed attempt: {trips[0]} without WAIT, {trips[1]} with"
    )


@pytest.mark.parametrize("sentinel", [1], indirect=True)
def test_a_write_another_connection_could_not_replicate_is_never_confirmed_by_a_read(
    sentinel: RedisSentinelProcesses,
) -> None:
    """``WAIT`` counts a connection's own writes. A fence one connection wrote while the replica was
    frozen (unknown: ``NotReplicated``), then found "already fenced" by a script of another connection
    (another thread or replica) that writes nothing, must stay unconfirmed: acting on it (the Pod
    deleted, a replacement launched) and then losing it in a failover makes the old attempt current
    again, and it is launched a second time (the campaign's ``duplicate_replacement``, seed 3)."""
    durability = Durability(replicas=1, timeout_ms=300)
    primary = f"redis://127.0.0.1:{sentinel.primary.port}/0"
    writer, reader = redis.Redis.from_url(primary), redis.Redis.from_url(primary)
    for client in (writer, reader):
        attach(client, durability)
    keys = SwarmKeys("agentihooks", "swarm-a")
    fence = writer.register_script("return redis.call('HSET', KEYS[1], 'exe-1', 'fenced')")
    look = reader.register_script("return redis.call('HGET', KEYS[1], 'exe-1')")
    mark = keys.wait_mark
    assert run_script(reader, look, [keys.attempt_fences], [], mark=mark) is None  # the reader wrote once
    sentinel.freeze_replicas()
    try:
        with pytest.raises(NotReplicated):
            run_script(writer, fence, [keys.attempt_fences], [], mark=mark)
        with pytest.raises(NotReplicated) as seen:
            run_script(reader, look, [keys.attempt_fences], [], mark=mark)
        assert seen.value.answer == b"fenced", "the primary holds it; nothing may act on it yet"
    finally:
        sentinel.thaw_replicas()
    sentinel.wait_replicated()
    assert run_script(reader, look, [keys.attempt_fences], [], mark=mark) == b"fenced"
    writer.close()
    reader.close()
