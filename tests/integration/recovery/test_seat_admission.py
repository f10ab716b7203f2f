"""Batched admission of generation 1 on real Redis: round trips grow with batches, not seats, and a
controller that dies (or loses its lease) between two batches leaves a takeover that admits and
launches the rest exactly once.
"""

from __future__ import annotations

import json
import math

import pytest
from agentihooks_operator.recovery import InjectedFault, LeaseLost
from agentihooks_operator.recovery.store.clock import RedisClock
from testsupport.counting import CountingConnection, counted
from testsupport.recovery import swarm_spec


class CrashAtNth:
    """Raises :class:`InjectedFault` the ``nth`` time ``point`` is reached (once)."""

    def __init__(self, point: str, nth: int) -> None:
        self.point, self.nth, self.seen = point, nth, 0

    def __call__(self, point: str) -> None:
        if point == self.point:
            self.seen += 1
            if self.seen == self.nth:
                raise InjectedFault(f"injected crash at {point} #{self.nth}")


def assert_each_seat_once(r, client, launcher, seats: int) -> None:  # type: ignore[no-untyped-def]
    """One attempt per seat, admitted once, launched once, its journal ``ok``, no work left."""
    k = r.keys
    current = {s.decode(): e.decode() for s, e in client.hgetall(k.seats).items()}
    assert len(current) == seats and client.hlen(k.attempt_records) == seats
    assert r.metrics()["admissions:first"] == seats
    assert client.hlen(k.launch_grants) == seats and client.hlen(k.worker_credentials) == seats
    assert client.hlen(k.ledger_tasks) == seats
    for eid in current.values():
        assert launcher.created[eid] == 1 and launcher.calls.count(("launch", eid)) == 1
    journals = client.hmget(k.attempt_journal, list(current.values()))
    assert all(json.loads(j)["launch"]["status"] == "ok" for j in journals)
    assert client.hlen(k.recovery_work) == 0
    assert sum(n for n in launcher.created.values()) == seats


def test_2000_seats_cost_round_trips_per_batch_and_a_second_call_admits_nothing(
    make, redis_url, launcher
) -> None:  # type: ignore[no-untyped-def]
    client = counted(redis_url)
    spec = swarm_spec(2000)
    r = make(client=client, clock=RedisClock(client))
    r.acquire()
    r.load_scripts()
    before = CountingConnection.sent
    plans = r.ensure_seats(spec, batch=300)
    trips = CountingConnection.sent - before
    batches = math.ceil(2000 / 300)
    assert len(plans) == 2000 and len({p.execution_id for p in plans}) == 2000
    # the seat list; per batch the admission, the launches' marks, and (after the first) a renewal;
    # the clock's first TIME
    assert trips <= 1 + 3 * batches + 1
    assert_each_seat_once(r, client, launcher, 2000)
    stored = json.loads(client.hget(r.keys.attempt_records, plans[0].execution_id))
    assert stored["generation"] == 1 and stored["state"] == "admitted" and stored["epoch"] == r.epoch
    before = CountingConnection.sent
    assert r.ensure_seats(spec, batch=300) == []
    assert CountingConnection.sent - before == 1  # only the seat list was read
    assert_each_seat_once(r, client, launcher, 2000)


def test_a_seat_admitted_meanwhile_is_not_admitted_again(make, client, launcher) -> None:  # type: ignore[no-untyped-def]
    """eng-2 is admitted (by a nested call) after this call read the seat list, before its script."""
    spec = swarm_spec(3)
    only_eng2 = spec.model_copy(update={"seats": [spec.seats[1]]})
    nested: list[str] = []
    started: list[bool] = []

    def meanwhile(point: str) -> None:
        if point == "before:admit" and not started:
            started.append(True)
            nested.extend(p.execution_id for p in r.ensure_seats(only_eng2))

    r = make(faults=meanwhile)
    plans = r.ensure_seats(spec)
    assert sorted(p.seat for p in plans) == ["eng-1", "eng-3"]
    assert len(nested) == 1 and client.hget(r.keys.seats, "eng-2").decode() == nested[0]
    assert_each_seat_once(r, client, launcher, 3)


CRASHES = [  # (point, its nth occurrence, seats admitted when it crashes); batches of 100 of 250 seats
    ("before:admit", 2, 100),  # between two batches: the first admitted and launched, the second not sent
    ("after:admit", 2, 200),  # the second admitted, none of its launches sent
    ("before:launch", 130, 200),  # in the middle of the second batch's launches
    ("after:launch", 130, 200),  # a launch sent, the batch's marks not written
]


@pytest.mark.parametrize(("point", "nth", "admitted"), CRASHES)
def test_a_crash_between_batches_then_a_takeover_admits_the_rest_exactly_once(
    make, client, launcher, point, nth, admitted
) -> None:  # type: ignore[no-untyped-def]
    spec = swarm_spec(250)
    crashing = make(faults=CrashAtNth(point, nth))
    with pytest.raises(InjectedFault):
        crashing.ensure_seats(spec, batch=100)
    assert client.hlen(crashing.keys.seats) == admitted
    fresh = make()  # the restarted controller: same identity, new epoch
    fresh.ensure_seats(spec, batch=100)
    fresh.reconcile(spec, [])  # observes the launches left unknown before sending any again
    fresh.reconcile(spec, [])  # and once more: nothing left, nothing repeated
    assert_each_seat_once(fresh, client, launcher, 250)


def test_a_lease_lost_between_batches_stops_the_admission_and_the_new_holder_finishes(
    make, client, launcher
) -> None:  # type: ignore[no-untyped-def]
    spec = swarm_spec(250)
    other = make("ctl-b")
    seen = []

    def taken_over(point: str) -> None:  # the lease expires after the first batch; ctl-b takes it
        if point == "after:admit" and not seen:
            seen.append(point)
            client.delete(other.keys.control_owner)
            assert other.acquire()

    a = make(faults=taken_over)
    with pytest.raises(LeaseLost):
        a.ensure_seats(spec, batch=100)
    assert client.hlen(a.keys.seats) == 100  # the second batch was never admitted
    assert a.writes_refused >= 1
    other.ensure_seats(spec, batch=100)
    other.reconcile(spec, [])  # the first batch's launches, sent by ctl-a but never marked
    assert_each_seat_once(other, client, launcher, 250)


def test_a_batch_of_no_seats_is_refused(make) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="at least 1 seat"):
        make().ensure_seats(swarm_spec(1), batch=0)
