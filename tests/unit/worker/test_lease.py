"""The worker lease's rules with a clock the test moves: when the agent must stop, and why."""

from __future__ import annotations

from typing import Any

import pytest
from agentihooks_checkpoint.stores.remote import ControlRefused
from agentihooks_worker.attribution import CLAUDE_HEADERS, ENV, attributed
from agentihooks_worker.lease import LeaseFenced, WorkerLease, is_fenced


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _lease(clock: Clock, renew: Any = lambda: None, **kw: Any) -> WorkerLease:
    return WorkerLease(renew, duration=60, stop_budget=10, margin=1, clock=clock, **kw)


def test_the_deadline_counts_from_when_the_acknowledged_renewal_was_sent() -> None:
    clock = Clock()

    def slow_renewal() -> None:
        clock.now += 7  # the answer took 7 s: the lease still counts from the send

    lease = _lease(clock, slow_renewal)
    assert lease.stop_at is None
    lease.acquire()
    assert lease.stop_at == 1000 + 60 - 10 - 1
    assert lease.check() == pytest.approx(1049 - 1007)
    clock.now = 1048.9
    assert lease.check() > 0 and lease.stopped is None
    clock.now = 1049
    stops: list[str] = []
    lease._on_stop = stops.append
    assert lease.check() <= 0
    assert lease.stopped == "lease_expired" and stops == ["lease_expired"]
    lease.check()
    assert stops == ["lease_expired"]  # once


def test_a_failed_renewal_extends_nothing_and_an_older_send_never_shortens() -> None:
    clock = Clock()
    calls: list[int] = []

    def flaky() -> None:
        calls.append(1)
        if len(calls) == 2:
            raise ConnectionError("away")

    lease = _lease(clock, flaky)
    lease.acquire()
    clock.now += 20
    with pytest.raises(ConnectionError):
        lease.renew()
    assert lease.stop_at == 1049 and lease.stopped is None
    lease._acked(1010)
    lease._acked(1005)  # a renewal sent earlier, acknowledged later: no step back
    assert lease.stop_at == 1059


def test_the_fenced_answer_stops_at_once_and_is_recognised_through_wrappers() -> None:
    clock = Clock()

    def fenced() -> None:
        raise ControlRefused(410, "fenced", "this attempt was fenced (node_lost)")

    lease = _lease(clock, fenced)
    with pytest.raises(LeaseFenced):
        lease.acquire()
    assert lease.stopped == "fenced"
    stops: list[str] = []
    lease._sent = clock.now  # as if acquired before the fence
    lease.start(stops.append)
    assert stops == ["fenced"]
    try:
        try:
            raise ControlRefused(410, "fenced", "x")
        except ControlRefused as e:
            raise RuntimeError("capture failed") from e
    except RuntimeError as wrapped:
        assert is_fenced(wrapped)
    assert not is_fenced(ControlRefused(403, "forbidden_scope", "x"))
    assert not is_fenced(None)


def test_a_lease_shorter_than_the_stop_budget_is_refused() -> None:
    with pytest.raises(ValueError, match="outlast"):
        WorkerLease(lambda: None, duration=10, stop_budget=9, margin=1)


def test_the_harness_names_its_attempt_to_the_model_api() -> None:
    env = attributed({CLAUDE_HEADERS: "X-Team: a\nX-Agentihooks-Execution: forged"}, "exe-1")
    assert env[ENV] == "exe-1"
    assert env[CLAUDE_HEADERS].splitlines() == ["X-Team: a", "X-Agentihooks-Execution: exe-1"]
    assert attributed({}, "exe-2")[CLAUDE_HEADERS] == "X-Agentihooks-Execution: exe-2"


def test_acquire_gives_up_when_nothing_was_acknowledged_and_at_once_when_fenced() -> None:
    clock = Clock()
    calls: list[int] = []

    def away() -> None:
        calls.append(1)
        raise ConnectionError("away")

    with pytest.raises(ConnectionError):
        _lease(clock, away).acquire(timeout=0)
    assert calls == [1] and clock.now == 1000

    def fenced() -> None:
        calls.append(2)
        raise ControlRefused(410, "fenced", "x")

    with pytest.raises(LeaseFenced):
        _lease(clock, fenced).acquire(timeout=3600)  # no retry: the answer is final
    assert calls == [1, 2]
