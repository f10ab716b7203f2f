"""Round trips per pass: constant for healthy attempts, a bounded handful per failed attempt.

Counted at the connection (one per command or pipeline sent), not by the core itself, and with the
production clock (:class:`RedisClock`: the scripts read ``TIME`` inside Redis) as well as the
default one.
"""

from __future__ import annotations

import pytest
from agentihooks_operator.recovery.fanout import WORKERS
from agentihooks_operator.recovery.store.clock import RedisClock
from testsupport.counting import CountingConnection, counted, warm_pool
from testsupport.recovery import observe, swarm_spec


def healthy_trips(make, client, seats: int) -> int:  # type: ignore[no-untyped-def]
    spec = swarm_spec(seats)
    r = make(client=client)
    plans = r.ensure_seats(spec)
    obs = observe([(p.execution_id, p.seat, 1) for p in plans])
    r.reconcile(spec, obs)  # warm: scripts loaded
    before = CountingConnection.sent
    report = r.reconcile(spec, obs)
    assert report.round_trips == CountingConnection.sent - before
    return CountingConnection.sent - before


def test_healthy_pass_costs_the_same_for_3_and_60_attempts(make, redis_url) -> None:  # type: ignore[no-untyped-def]
    client = counted(redis_url)
    small = healthy_trips(make, client, 3)
    client.flushall()
    large = healthy_trips(make, client, 60)
    assert small == large == 2


def test_each_failed_attempt_costs_at_most_8_round_trips(make, redis_url, checkpoint) -> None:  # type: ignore[no-untyped-def]
    client = counted(redis_url)
    spec = swarm_spec(1)
    r = make(client=client)
    eid = r.ensure_seats(spec)[0].execution_id
    r.report_session(eid, "sess-1")
    checkpoint(eid, session_id="sess-1")
    r.reconcile(spec, observe([(eid, "eng-1", 1)]))
    r.load_scripts()  # as a warm controller has them
    before = CountingConnection.sent
    report = r.reconcile(spec, observe([(eid, "eng-1", 1)], failed={eid: "oom_killed"}))
    trips = CountingConnection.sent - before
    assert report.launches and report.fenced == [eid]
    # lease + snapshot + detail read are per pass; the rest is this one attempt
    assert trips - 3 <= 8


@pytest.mark.parametrize("failures", [1, 10])
@pytest.mark.parametrize("resync_s", [30.0, 0.0], ids=["redis-clock", "redis-clock-resync-every-reading"])
def test_failed_attempts_with_the_redis_clock_cost_at_most_8_round_trips_each(
    make, redis_url, checkpoint, failures, resync_s
) -> None:  # type: ignore[no-untyped-def]
    """The production configuration: the operator's clock is Redis's. Its default re-sync (every
    30 s) falls outside a pass; ``resync_s=0`` is the worst case, a ``TIME`` for every reading."""
    client = counted(redis_url)
    clock = RedisClock(client, resync_s=resync_s)
    spec = swarm_spec(failures)
    r = make(client=client, clock=clock)
    plans = r.ensure_seats(spec)
    for i, p in enumerate(plans):
        r.report_session(p.execution_id, f"sess-{i}")
        checkpoint(p.execution_id, session_id=f"sess-{i}", task_id=p.task_id)
    seen = [(p.execution_id, p.seat, 1) for p in plans]
    r.reconcile(spec, observe(seen))
    r.load_scripts()  # as a warm controller has them
    warm_pool(client, WORKERS + 1)  # the pass's pool of threads, as a warm controller has it
    before = CountingConnection.sent
    report = r.reconcile(spec, observe(seen, failed={p.execution_id: "oom_killed" for p in plans}))
    trips = CountingConnection.sent - before
    assert sorted(report.fenced) == sorted(p.execution_id for p in plans)
    assert len(report.launches) == failures
    assert all(d.mode == "resume" for d in report.decisions)
    # lease + snapshot + detail read are per pass; the rest is the failed attempts'
    assert (trips - 3) / failures <= 8
    # the clock's own TIME round trips are the only ones the writer does not count
    assert trips - report.round_trips == (failures if resync_s == 0 else 0)


def test_current_attempts_reads_admitted_attempts_in_one_round_trip(make, redis_url) -> None:  # type: ignore[no-untyped-def]
    client = counted(redis_url)
    spec = swarm_spec(3, automation=False)
    r = make(client=client)
    plans = r.ensure_seats(spec)
    ids = {p.seat: p.execution_id for p in plans}
    r.reconcile(
        spec, observe([(p.execution_id, p.seat, 1) for p in plans], failed={ids["eng-2"]: "oom_killed"})
    )
    r.current_attempts()  # warm: the script is loaded
    before, trips = CountingConnection.sent, r.round_trips
    current = r.current_attempts()
    assert CountingConnection.sent - before == 1 and r.round_trips - trips == 1
    # eng-2's attempt is fenced and waits for a decision: it is no longer current
    assert [(a.seat, a.execution_id) for a in current] == [("eng-1", ids["eng-1"]), ("eng-3", ids["eng-3"])]
    assert all(a.state == "admitted" for a in current)


def test_current_attempts_of_a_swarm_without_seats_is_empty(make, redis_url) -> None:  # type: ignore[no-untyped-def]
    assert make(client=counted(redis_url)).current_attempts() == []
