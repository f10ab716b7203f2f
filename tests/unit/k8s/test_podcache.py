"""The watch-fed Pod cache: what a pass reads, when it must list in full, and a list racing the watch."""

from __future__ import annotations

from typing import Any

import pytest
from agentihooks_operator.k8s.observing.podcache import PodCache, feed, register
from agentihooks_operator.k8s.scope import node_period, touched_nodes


def pod(name: str, phase: str = "Running", node: str = "n1") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"nodeName": node}, "status": {"phase": phase}}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def listed(cache: PodCache, *pods: dict[str, Any]) -> None:
    cache.begin_list()
    cache.end_list(pods)


def test_a_new_cache_is_listed_before_anything_is_read() -> None:
    cache = PodCache()
    assert cache.due()
    cache.feed("ADDED", pod("a"))
    assert cache.due(), "events alone never prove nothing was missed before them"
    listed(cache, pod("a"))
    assert not cache.due()


def test_a_pass_reads_only_the_pods_changed_since_the_last_take() -> None:
    cache = PodCache()
    view = (cache.begin_list(), cache.end_list([pod("a"), pod("b")]))[1]
    assert view.full and view.changed == {"a", "b"}
    cache.feed("MODIFIED", pod("a", "Failed"))
    cache.feed("ADDED", pod("c", "Pending"))
    view = cache.take()
    assert not view.full and view.changed == {"a", "c"}
    assert view.pods["a"]["status"]["phase"] == "Failed" and set(view.pods) == {"a", "b", "c"}
    assert cache.take().changed == frozenset()


def test_a_deleted_pod_is_changed_and_absent() -> None:
    cache = PodCache()
    listed(cache, pod("a"), pod("b"))
    cache.feed("DELETED", pod("a"))
    view = cache.take()
    assert view.changed == {"a"} and "a" not in view.pods and "b" in view.pods


def test_a_restarted_watch_makes_the_next_read_a_full_list() -> None:
    """kopf re-lists when its watch restarts (event type None); a Pod deleted meanwhile sent nothing."""
    cache = PodCache()
    listed(cache, pod("a"), pod("b"))
    cache.feed(None, pod("b"))
    assert cache.due()
    listed(cache, pod("b"))  # the safety net: "a" is gone although no DELETED came
    assert set(cache.take().pods) == {"b"}


def test_the_full_list_is_due_again_after_the_resync_period() -> None:
    clock = Clock()
    cache = PodCache(resync_s=60, clock=clock)
    listed(cache, pod("a"))
    clock.now = 59.9
    assert not cache.due()
    clock.now = 60.0
    assert cache.due()


def test_invalidate_and_a_failed_list_make_the_next_read_a_full_list() -> None:
    cache = PodCache()
    listed(cache, pod("a"))
    cache.invalidate()
    assert cache.due()
    cache.begin_list()
    cache.abort_list()
    assert cache.due()


def test_events_seen_while_a_list_is_in_flight_win_over_it() -> None:
    """The list may have been read before those events happened: they are applied on top."""
    cache = PodCache()
    cache.begin_list()
    cache.feed("MODIFIED", pod("a", "Failed"))
    cache.feed("DELETED", pod("b"))
    cache.feed("ADDED", pod("c"))
    view = cache.end_list([pod("a", "Running"), pod("b")])  # as the API server answered, earlier
    assert view.full and set(view.pods) == {"a", "c"}
    assert view.pods["a"]["status"]["phase"] == "Failed"
    cache.feed("MODIFIED", pod("c", "Failed"))  # after the list: applied once, as usual
    assert cache.take().changed == {"c"}


def test_bad_events_are_refused_with_a_clear_error() -> None:
    cache = PodCache()
    with pytest.raises(ValueError, match="unknown watch event type 'BOOKMARK'"):
        cache.feed("BOOKMARK", pod("a"))
    with pytest.raises(ValueError, match=r"without metadata\.name"):
        cache.feed("ADDED", {"metadata": {}})
    with pytest.raises(ValueError, match="resync_s must be positive"):
        PodCache(resync_s=0)


def test_feed_reaches_the_registered_cache_of_the_pods_swarm_only() -> None:
    memo: dict[str, Any] = {"podcaches": {}}
    cache = register(memo, "ns", "example")
    listed(cache)
    feed(memo, "ns", "example", {"type": "ADDED", "object": pod("a")})
    feed(memo, "ns", "other", {"type": "ADDED", "object": pod("b")})  # no cache: dropped
    feed(memo, "ns", "example", {"type": "BOOKMARK", "object": pod("c")})  # not a Pod change
    assert cache.take().changed == {"a"}
    assert register(memo, "ns", "example") is not cache, "a new pass starts from a new, unlisted cache"


def node(name: str, ready: str, since: str = "2026-11-30T10:00:00Z") -> dict[str, Any]:
    cond = {"type": "Ready", "status": ready, "lastTransitionTime": since}
    return {"metadata": {"name": name}, "status": {"conditions": [cond]}}


def test_touched_nodes_are_the_changed_vanished_new_and_not_ready_ones() -> None:
    before = {"a": node("a", "True"), "b": node("b", "True"), "c": node("c", "True"), "d": node("d", "False")}
    after = {
        "a": node("a", "True"),
        "c": node("c", "False", "2026-11-30T11:00:00Z"),
        "d": node("d", "False"),
        "e": node("e", "True"),
    }
    assert touched_nodes(before, after) == {"b", "c", "d", "e"}
    assert touched_nodes(after, after) == {"c", "d"}, "a NotReady Node is watched while time runs"


def test_the_node_period_is_a_quarter_of_node_loss_within_bounds() -> None:
    assert node_period(40) == 10 and node_period(8) == 2
    assert node_period(600) == 10 and node_period(1) == 0.5


def test_a_quiet_take_copies_nothing_and_a_taken_map_never_changes_under_its_reader() -> None:
    """Copy on write: a pass gets the cache's own map (no copy of every Pod when nothing changed), and
    an event after that take changes a copy, never the map the pass still reads."""
    cache = PodCache()
    cache.begin_list()
    cache.end_list([{"metadata": {"name": f"p-{i}"}} for i in range(3)])
    first = cache.take()
    again = cache.take()
    assert again.pods is first.pods and again.changed == frozenset()
    cache.feed("DELETED", {"metadata": {"name": "p-0"}})
    cache.feed("ADDED", {"metadata": {"name": "p-9"}})
    assert sorted(first.pods) == ["p-0", "p-1", "p-2"]  # what the earlier pass read is untouched
    after = cache.take()
    assert sorted(after.pods) == ["p-1", "p-2", "p-9"] and after.changed == {"p-0", "p-9"}
    assert after.pods is not first.pods


def test_a_pod_seen_deleted_is_remembered_as_once_created() -> None:
    """The evidence a lost launch needs: this Pod was created (and went), whatever a read says now."""
    cache = PodCache()
    listed(cache, pod("a"), pod("b"))
    assert not cache.was_deleted("a") and not cache.was_deleted("never")
    cache.feed("DELETED", pod("a"))
    assert cache.was_deleted("a")
    # A Pod deleted while the watch was away: the next full list no longer shows it.
    cache.feed("ADDED", pod("c"))
    listed(cache, pod("c"))
    assert cache.was_deleted("b") and not cache.was_deleted("c")
    assert not cache.was_deleted("never")


def test_the_names_seen_deleted_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    import agentihooks_operator.k8s.observing.podcache as podcache

    monkeypatch.setattr(podcache, "GONE_KEPT", 3)
    cache = PodCache()
    for name in "abcde":
        cache.feed("ADDED", pod(name))
        cache.feed("DELETED", pod(name))
    assert [n for n in "abcde" if cache.was_deleted(n)] == ["c", "d", "e"]  # the oldest forgotten
