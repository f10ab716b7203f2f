"""The placement policy's pure parts: rendezvous ranking, settling, and the keep/take decisions."""

from __future__ import annotations

from collections import Counter

import pytest
from agentihooks_operator.k8s.membership import Members, Membership, parse
from agentihooks_operator.k8s.placement import Timing, keep, preferred, take, weight

SWARMS = [f"agentihooks:swarm:{{s-{i:03d}}}:control-owner" for i in range(300)]


def test_the_weight_is_the_same_in_every_process() -> None:
    # blake2b of "swarm\0replica", not Python's per-process salted hash(): a fixed value
    assert weight("a", "op-a") == 0x68EFFB9EBAA52820
    assert weight("a", "op-a") != weight("a", "op-b")


def test_preferred_is_deterministic_and_independent_of_order() -> None:
    replicas = ["op-a", "op-b", "op-c"]
    for swarm in SWARMS[:20]:
        assert preferred(swarm, replicas) == preferred(swarm, list(reversed(replicas)))
    assert preferred("x", []) is None
    assert preferred("x", ["only"]) == "only"


def test_three_replicas_share_swarms_about_evenly() -> None:
    counts = Counter(preferred(s, ["op-a", "op-b", "op-c"]) for s in SWARMS)
    assert set(counts) == {"op-a", "op-b", "op-c"}
    assert all(70 <= n <= 130 for n in counts.values()), counts  # 100 each expected


def test_a_dead_replica_moves_only_its_own_swarms() -> None:
    before = {s: preferred(s, ["op-a", "op-b", "op-c"]) for s in SWARMS}
    after = {s: preferred(s, ["op-a", "op-c"]) for s in SWARMS}
    moved = {s for s in SWARMS if before[s] != after[s]}
    assert moved == {s for s in SWARMS if before[s] == "op-b"}


def test_a_new_replica_takes_only_from_others_and_about_its_share() -> None:
    before = {s: preferred(s, ["op-a", "op-b", "op-c"]) for s in SWARMS}
    after = {s: preferred(s, ["op-a", "op-b", "op-c", "op-d"]) for s in SWARMS}
    moved = [s for s in SWARMS if before[s] != after[s]]
    assert all(after[s] == "op-d" for s in moved)
    assert 45 <= len(moved) <= 105  # a quarter of 300 expected


def test_only_settled_replicas_are_candidates() -> None:
    members = Members(now_ms=10_000, joined_ms={"old": 1_000, "new": 9_500, "edge": 9_000})
    assert members.settled(1000) == ["edge", "old"]
    assert members.settled(0) == ["edge", "new", "old"]


def test_a_holder_keeps_until_another_is_preferred_and_the_hold_has_passed() -> None:
    assert keep("op-a", None, held_for=100, hold=30)  # nobody settled: keep
    assert keep("op-a", "op-a", held_for=100, hold=30)
    assert keep("op-a", "op-b", held_for=29.9, hold=30)  # hysteresis
    assert not keep("op-a", "op-b", held_for=30, hold=30)


def test_a_non_holder_takes_when_preferred_or_the_lease_stayed_free() -> None:
    assert take("op-a", None, free_for=None, grace=2)  # cold start: first come
    assert take("op-a", "op-a", free_for=None, grace=2)
    assert not take("op-a", "op-b", free_for=None, grace=2)  # held by someone
    assert not take("op-a", "op-b", free_for=1.9, grace=2)  # the preferred one may still take it
    assert take("op-a", "op-b", free_for=2, grace=2)  # it does not: never left unheld for long


def test_timing_follows_the_heartbeat_and_the_lease() -> None:
    t = Timing.of(0.5, hold=3, lease_ms=2000)
    assert (t.settle, t.dead, t.hold, t.grace) == (1.0, 1.5, 3, 2.0)


def test_the_script_answer_is_parsed_per_operator_id() -> None:
    answer = [5000, [b"t1 op-a", b"t2 op-b", b"t3 op-a"], [b"100", b"200", b"50"]]
    assert parse(answer) == Members(now_ms=5000, joined_ms={"op-a": 50, "op-b": 200})


def test_an_operator_id_may_hold_spaces_but_not_be_empty() -> None:
    assert parse([1, [b"t1 op a"], [b"1"]]).joined_ms == {"op a": 1}
    with pytest.raises(ValueError, match="must not be empty"):
        Membership(None, "agentihooks", "", dead_ms=1000)  # type: ignore[arg-type]
