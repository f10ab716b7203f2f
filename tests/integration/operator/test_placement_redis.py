"""The placement's live set and decisions against a real redis-server (no Kubernetes).

Heartbeats register replicas, a clean stop leaves at once, a replica that stops beating is
dropped after ``dead``; a holder hands over to the preferred replica, and a non-preferred one
takes a free lease only after the grace.
"""

from __future__ import annotations

import time

import redis
from agentihooks_operator.k8s.placement import Placement, Timing
from agentihooks_operator.recovery.store.keys import SwarmKeys


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _placement(client: redis.Redis, me: str, clock: Clock, **timing: float) -> Placement:
    values = {"heartbeat": 0.05, "settle": 0.0, "dead": 60.0, "hold": 0.0, "grace": 2.0, **timing}
    return Placement(client, "agentihooks", me, Timing(**values), monotonic=clock)


def _swarm_preferring(p: Placement, who: str) -> str:
    for i in range(100):
        if p.choice(SwarmKeys("agentihooks", f"s{i}", "ns").control_owner) == who:
            return f"s{i}"
    raise AssertionError(f"no swarm prefers {who}")


def test_replicas_join_leave_and_are_dropped_when_they_stop_beating(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    clock = Clock()
    a, b = _placement(client, "op-a", clock), _placement(client, "op-b", clock, dead=0.2)
    c = _placement(client, "op-c", clock)
    first = a.refresh()
    b.refresh()
    c.refresh()
    assert first is not None
    seen = a.refresh()
    assert seen is not None and set(seen.joined_ms) == {"op-a", "op-b", "op-c"}
    joined_b = seen.joined_ms["op-b"]
    c.close()  # a clean stop: gone at once
    assert set(a.refresh().joined_ms) == {"op-a", "op-b"}  # type: ignore[union-attr]
    time.sleep(0.3)  # op-a beats no more
    # b's view uses b's ``dead`` (0.2 s): a, whose last beat is 0.3 s old, is not live
    assert set(b.refresh().joined_ms) == {"op-b"}  # type: ignore[union-attr]
    joined = a.membership.beat().joined_ms["op-a"]
    assert joined == first.joined_ms["op-a"]
    # a stalled, then beat again: live once more, with its first join time (settled at once)
    assert b.refresh().joined_ms == {"op-a": joined, "op-b": joined_b}  # type: ignore[union-attr]


def test_a_holder_hands_over_and_a_free_lease_is_taken_after_the_grace(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    clock = Clock()
    a, b = _placement(client, "op-a", clock), _placement(client, "op-b", clock)
    a.refresh()
    b.refresh()
    a.refresh()
    name = _swarm_preferring(a, "op-b")
    key = SwarmKeys("agentihooks", name, "ns").control_owner
    assert b.choice(key) == "op-b"  # both replicas agree
    assert b.mine("ns", name, holding=False)  # the preferred one takes it
    assert b.mine("ns", name, holding=True)
    assert not a.mine("ns", name, holding=True)  # another one holds it: hand over
    client.set(key, "{}")
    assert not a.mine("ns", name, holding=False)  # held: leave it
    client.delete(key)
    assert not a.mine("ns", name, holding=False)  # free, but the preferred one may still take it
    clock.t += 1.9
    assert not a.mine("ns", name, holding=False)
    clock.t += 0.1
    assert a.mine("ns", name, holding=False)  # free for the whole grace: nobody takes it, a does


def test_the_hold_keeps_a_swarm_where_it_is_for_a_while(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    clock = Clock()
    a = _placement(client, "op-a", clock, hold=30)
    b = _placement(client, "op-b", clock, hold=30)
    b.refresh()
    a.refresh()
    name = _swarm_preferring(a, "op-b")
    assert a.mine("ns", name, holding=True)  # just taken (first seen holding now)
    clock.t += 29
    assert a.mine("ns", name, holding=True)
    clock.t += 1
    assert not a.mine("ns", name, holding=True)


def test_an_unsettled_replica_is_nobodys_preference_yet(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    clock = Clock()
    a = _placement(client, "op-a", clock, settle=60)
    a.refresh()
    key = SwarmKeys("agentihooks", "s1", "ns").control_owner
    assert a.choice(key) is None  # a cold start: first come
    assert a.mine("ns", "s1", holding=False)
    clock.t += 61  # a stale view (no beat for longer than dead) counts as none
    assert a.choice(key) is None
