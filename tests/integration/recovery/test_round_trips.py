"""Round trips per pass: constant for healthy attempts, a bounded handful per failed attempt.

Counted at the connection (one per command or pipeline sent), not by the core itself.
"""

from __future__ import annotations

from typing import Any

import redis
from testsupport.recovery import observe, swarm_spec


class CountingConnection(redis.Connection):
    sent = 0

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        CountingConnection.sent += 1
        super().send_packed_command(command, check_health)


def counted(redis_url: str) -> redis.Redis:
    pool = redis.ConnectionPool.from_url(redis_url, connection_class=CountingConnection)
    return redis.Redis(connection_pool=pool)


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
