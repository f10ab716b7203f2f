"""Lease and epoch: one writer per swarm; a controller that lost the lease changes nothing."""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest
import redis
from agentihooks_checkpoint.directive import RestoreOutcome
from agentihooks_operator.recovery import LeaseLost
from agentihooks_operator.recovery import lease as lease_module
from agentihooks_operator.recovery.lease import LeaseChurn
from agentihooks_operator.recovery.store.durable import Durability, NotReplicated, attach
from agentihooks_operator.redisconn import connect
from redis.sentinel import MasterNotFoundError
from testsupport.recovery import dump_keys, observe, swarm_spec


def wait_until_gone(client, key: str) -> None:  # type: ignore[no-untyped-def]
    """Let the lease expire now (its TTL cut to 1 ms), then wait for Redis to drop it."""
    client.pexpire(key, 1)
    deadline = time.monotonic() + 10
    while client.exists(key):
        assert time.monotonic() < deadline, "lease did not expire"
        time.sleep(0.02)


def test_acquire_sets_owner_and_epoch_and_renewal_keeps_it(make, client) -> None:  # type: ignore[no-untyped-def]
    a = make("ctl-a")
    assert a.acquire() is True
    assert a.epoch == 1
    owner = json.loads(client.get(a.keys.control_owner))
    assert owner["owner"] == "ctl-a" and owner["epoch"] == 1 and owner["expires_at"] > 0
    assert 0 < client.pttl(a.keys.control_owner) <= 15000
    assert a.acquire() is True and a.epoch == 1
    assert int(client.get(a.keys.control_epoch)) == 1


def test_keys_carry_the_swarm_in_a_hash_tag(make, client) -> None:  # type: ignore[no-untyped-def]
    a = make("ctl-a")
    a.acquire()
    assert client.exists("agentihooks:swarm:{swarm-a}:control-owner")
    assert client.exists("agentihooks:swarm:{swarm-a}:control-epoch")


def test_second_controller_is_refused_while_the_lease_is_held(make) -> None:  # type: ignore[no-untyped-def]
    a, b = make("ctl-a"), make("ctl-b")
    assert a.acquire()
    assert b.acquire() is False
    assert b.epoch == 0


def test_takeover_after_expiry_increments_the_epoch(make, client) -> None:  # type: ignore[no-untyped-def]
    a, b = make("ctl-a"), make("ctl-b")
    assert a.acquire() and a.epoch == 1
    wait_until_gone(client, a.keys.control_owner)
    assert b.acquire() and b.epoch == 2
    assert a.acquire() is False


def test_lease_churn_is_counted_across_rebuilt_instances(make, client) -> None:  # type: ignore[no-untyped-def]
    """The operator builds a new Recovery when a Swarm's daemon restarts; given the same churn, the
    takeover and loss counts go on from the earlier instance's (they restarted at 0, hiding churn)."""
    churn = LeaseChurn()
    first = make("ctl-a", churn=churn)
    assert first.acquire() and first.acquire()  # a renewal is not a takeover
    assert first.lease_churn() == (1, 0)
    rebuilt = make("ctl-a", churn=churn)  # same identity, a new pass: a new epoch
    assert rebuilt.acquire() and rebuilt.epoch == 2
    assert rebuilt.lease_churn() == (2, 0) == first.lease_churn()
    wait_until_gone(client, rebuilt.keys.control_owner)
    other = make("ctl-b")
    assert other.acquire() and other.lease_churn() == (1, 0)  # its own count, not ctl-a's
    assert rebuilt.acquire() is False
    assert rebuilt.lease_churn() == (2, 1)
    assert make("ctl-a").lease_churn() == (0, 0)  # without a shared churn, a count of its own


def test_restarted_holder_takes_over_with_a_new_epoch(make) -> None:  # type: ignore[no-untyped-def]
    old = make("ctl-a")
    assert old.acquire() and old.epoch == 1
    new = make("ctl-a")  # same identity, new process
    assert new.acquire() and new.epoch == 2
    assert old.acquire() is False, "the old process may not renew the new epoch"


def test_release_lets_another_controller_in(make) -> None:  # type: ignore[no-untyped-def]
    a, b = make("ctl-a"), make("ctl-b")
    a.acquire()
    assert a.release() is True
    assert b.acquire() and b.epoch == 2


def test_a_given_up_lease_is_never_taken_back_by_the_same_instance(make, client) -> None:  # type: ignore[no-untyped-def]
    """The wind-down gives the lease up while a pass may still run: that pass may not retake it."""
    a = make("ctl-a")
    assert a.acquire() and a.epoch == 1
    assert a.give_up() is True
    assert client.get(a.keys.control_owner) is None
    assert a.acquire() is False and a.epoch == 0
    assert client.get(a.keys.control_owner) is None, "nothing was written"
    assert int(client.get(a.keys.control_epoch)) == 1, "no new epoch was taken"
    b = make("ctl-b")
    assert b.acquire() and b.epoch == 2


def test_a_renewal_in_flight_when_the_lease_is_given_up_takes_no_new_epoch(make, client, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Found by a clean-clone CI run: the last replica stopping moved the epoch from 3 to 4. Its pass
    thread's renewal was past the "given up" latch when the wind-down deleted the record; the renewal
    then found no record and took a new epoch, held until its TTL ran out. The renewal and the
    release are serialised now: the renewal finishes first (renewed), then the record is deleted."""
    a = make("ctl-a")
    assert a.acquire() and a.epoch == 1
    lease = a._lease
    in_flight, go = threading.Event(), threading.Event()
    real_trip = lease.w.trip

    def trip(n: int = 1) -> None:
        if threading.current_thread().name == "renewal" and not in_flight.is_set():
            in_flight.set()  # past the latch, before the script runs
            go.wait(10)
        real_trip(n)

    monkeypatch.setattr(lease.w, "trip", trip)
    renewal = threading.Thread(target=a.acquire, name="renewal")
    renewal.start()
    assert in_flight.wait(10)
    stop = threading.Thread(target=a.give_up, name="wind-down")
    stop.start()
    stop.join(0.5)  # without the serialisation the record is deleted here, under the renewal
    go.set()
    renewal.join(10)
    stop.join(10)
    assert not renewal.is_alive() and not stop.is_alive()
    assert client.get(a.keys.control_owner) is None, "the lease stays given up"
    assert int(client.get(a.keys.control_epoch)) == 1, "no new epoch was taken"
    assert a.epoch == 0 and a.lease_churn() == (1, 0)


def test_lease_too_short_is_refused(make) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="lease_ms"):
        make("ctl-a", lease_ms=5)


def test_loser_gets_every_write_refused_and_changes_nothing(make, client, spec, checkpoint, caplog) -> None:  # type: ignore[no-untyped-def]
    a = make("ctl-a")
    eid = a.ensure_seats(spec)[0].execution_id
    a.report_session(eid, "sess-1")
    built = checkpoint(eid, session_id="sess-1")
    first = a.reconcile(spec, observe([(eid, "eng-1", 1)], failed={eid: "oom_killed"}))
    new = first.decisions[0].replacement
    assert new is not None
    outcome = RestoreOutcome(
        execution_id=new,
        recovery="native",  # type: ignore[arg-type]
        checkpoint_id=built.checkpoint_id,
        session_id="sess-1",
        watermark=built.watermark,
    )
    obs = observe([(new, "eng-1", 2)], failed={new: "evicted"})
    wait_until_gone(client, a.keys.control_owner)
    b = make("ctl-b")
    assert b.acquire() and b.epoch == 2
    before = dump_keys(client)
    applied = a.writes_applied
    caplog.set_level(logging.WARNING, logger="agentihooks.recovery")

    # Every write path of the stale controller, still holding its old epoch in memory.
    attempts = [
        a.pause,
        a.unpause,
        lambda: a.report_session(new, "sess-2"),
        lambda: a.report_watermark(new, 9),
        lambda: a.mint_worker_credential(new),
        lambda: a.report_outcome(new, outcome),
        lambda: a.ensure_seats(swarm_spec(2, tag="v1")),
        lambda: a.decide(eid, "fresh", "operator"),
    ]
    for call in attempts:
        with pytest.raises(LeaseLost):
            call()
    report = a.reconcile(spec, obs)
    assert report.leader is False and report.fenced == [] and report.launches == []

    assert a.writes_applied == applied, "no write of the loser passed the guard"
    assert a.writes_refused >= 7
    assert dump_keys(client) == before
    assert "lost the lease" in caplog.text and "changed nothing" in caplog.text
    # The winner does the work.
    assert b.reconcile(spec, obs).fenced == [new]


def test_lease_lost_in_the_middle_of_a_pass_stops_it(make, client, spec) -> None:  # type: ignore[no-untyped-def]
    a = make("ctl-a")
    plans = a.ensure_seats(spec)
    eid = plans[0].execution_id

    def steal(point: str) -> None:
        if point == "after:fence":
            client.delete(a.keys.control_owner)
            make("ctl-b").acquire()

    a2 = make("ctl-a2", faults=steal)
    # hand the lease to a2 cleanly first
    a.release()
    assert a2.acquire()
    report = a2.reconcile(spec, observe([(eid, "eng-1", 1)], failed={eid: "evicted"}))
    assert report.lease_lost is True
    assert report.fenced == [eid]
    fence = json.loads(client.hget(a.keys.attempt_fences, eid))
    assert fence["released"] in ([], {}), "no release after the lease was lost"


def test_a_take_whose_answer_was_lost_is_adopted_not_taken_again(make, client) -> None:  # type: ignore[no-untyped-def]
    """The take ran in Redis but its answer never came back (a dropped connection, a WAIT that timed
    out): the instance still holds epoch 0. Its next take adopts the epoch it already has, counted once
    as a takeover, instead of moving the epoch again with no takeover counted."""
    a = make("ctl-a")
    lease = a._lease
    keys = [a.keys.control_owner, a.keys.control_epoch]
    # what the script did for this instance before the answer was lost
    answer = json.loads(lease._acquire(keys=keys, args=["ctl-a", 0, 15000, "", lease.incarnation]))
    assert answer == {"state": "acquired", "epoch": 1}
    assert a.epoch == 0
    assert a.acquire() and a.epoch == 1
    assert int(client.get(a.keys.control_epoch)) == 1
    assert a.lease_churn() == (1, 0)
    assert a.acquire() and a.epoch == 1 and a.lease_churn() == (1, 0)  # then renewed as usual
    restarted = make("ctl-a")  # the same holder in a new process: another incarnation, a new epoch
    wait_until_gone(client, a.keys.control_owner)
    assert restarted.acquire() and restarted.epoch == 2


def test_a_retake_whose_answer_was_lost_is_adopted_too(make, client) -> None:  # type: ignore[no-untyped-def]
    """Found by seed 7's campaign: the instance held epoch 1, its lease expired (a frozen Redis
    replica held its renewal in WAIT), and its retake ran in Redis at epoch 2 but the answer was lost.
    Asking again with epoch 1 it was told "held by ctl-a (epoch 2)", by itself, and dropped the lease
    to expire; the next take burnt epoch 3 with no takeover counted. It adopts epoch 2 now."""
    a = make("ctl-a")
    assert a.acquire() and a.epoch == 1
    lease, keys = a._lease, [a.keys.control_owner, a.keys.control_epoch]
    wait_until_gone(client, a.keys.control_owner)
    answer = json.loads(lease._acquire(keys=keys, args=["ctl-a", 1, 15000, "", lease.incarnation]))
    assert answer == {"state": "acquired", "epoch": 2}  # ...and lost on its way back
    assert a.epoch == 1
    assert a.acquire() and a.epoch == 2
    assert int(client.get(a.keys.control_epoch)) == 2 and a.lease_churn() == (2, 0)
    assert a.acquire() and a.epoch == 2  # renewed as usual from there


def test_a_lost_answer_adopts_nothing_another_instance_took(make, client) -> None:  # type: ignore[no-untyped-def]
    a, old = make("ctl-a"), make("ctl-a")
    assert old.acquire() and old.epoch == 1  # an earlier process of the same holder
    wait_until_gone(client, old.keys.control_owner)
    client.set(old.keys.control_owner, json.dumps({"owner": "ctl-a", "epoch": 1, "expires_at": 1}))
    assert a.acquire() and a.epoch == 2, "a record without this instance's incarnation is not its own"
    assert old.acquire() is False


def test_a_take_the_replicas_did_not_confirm_is_counted_once(make, redis_url, caplog) -> None:  # type: ignore[no-untyped-def]
    """The take ran on the primary and took epoch 1, but WAIT found no replica in time (NotReplicated):
    the instance does not hold the lease, yet the epoch moved, so the takeover is counted and logged
    now (seed 3's campaign: a take like this whose record expired before the next one was an epoch no
    replica ever counted). Adopting that epoch later is not counted again."""
    c = connect(redis_url)
    attach(c, Durability(replicas=1, timeout_ms=20))  # a standalone Redis has no replica: WAIT says 0
    a = make("ctl-a", client=c)
    with caplog.at_level(logging.INFO, "agentihooks.recovery"), pytest.raises(NotReplicated):
        a.acquire()
    assert a.epoch == 0 and int(c.get(a.keys.control_epoch)) == 1
    assert a.lease_churn() == (1, 0)
    assert "took the lease at epoch 1 (not yet confirmed by the replicas)" in caplog.text
    attach(c, None)
    with caplog.at_level(logging.INFO, "agentihooks.recovery"):
        assert a.acquire() and a.epoch == 1 and a.lease_churn() == (1, 0)
    assert "took the lease at epoch 1 (now confirmed)" in caplog.text  # held now, counted once
    assert int(c.get(a.keys.control_epoch)) == 1
    c.close()


def test_a_take_sentinel_named_no_primary_for_says_nothing_of_the_epoch(make, monkeypatch, caplog) -> None:  # type: ignore[no-untyped-def]
    """No primary was found, so nothing was sent: the pass reports the error, the lease adds no line."""
    a = make("ctl-a")

    def no_primary(c, script, keys, args, *, mark):  # type: ignore[no-untyped-def]
        raise MasterNotFoundError("No master found for 'agentihooks'")

    monkeypatch.setattr(lease_module, "run_script", no_primary)
    with caplog.at_level(logging.INFO, "agentihooks.recovery"), pytest.raises(MasterNotFoundError):
        a.acquire()
    assert "lease" not in caplog.text and a.epoch == 0 and a.lease_churn() == (0, 0)


def test_a_take_with_no_answer_says_the_epoch_may_have_moved(make, client, monkeypatch, caplog) -> None:  # type: ignore[no-untyped-def]
    """The connection dropped after the script ran: nothing is known, so the line says so (naming the
    error's type only); the next take adopts the epoch and counts it then."""
    a = make("ctl-a")

    def ran_then_lost(c, script, keys, args, *, mark):  # type: ignore[no-untyped-def]
        script(keys=list(keys), args=list(args))
        raise redis.ConnectionError("Connection closed by server.")

    monkeypatch.setattr(lease_module, "run_script", ran_then_lost)
    with caplog.at_level(logging.INFO, "agentihooks.recovery"), pytest.raises(redis.ConnectionError):
        a.acquire()
    assert "take of the lease got no answer (ConnectionError); the epoch may have moved" in caplog.text
    assert a.epoch == 0 and a.lease_churn() == (0, 0) and int(client.get(a.keys.control_epoch)) == 1
    monkeypatch.undo()
    with caplog.at_level(logging.INFO, "agentihooks.recovery"):
        assert a.acquire() and a.epoch == 1 and a.lease_churn() == (1, 0)
    assert "took the lease at epoch 1" in caplog.text
