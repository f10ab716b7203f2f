"""A blocked launch on real Redis: tried again with growing waits, never on every pass; a changed spec
or a new lease holder tries at once; once the cause is fixed it goes out exactly once."""

from __future__ import annotations

import json
from typing import Literal

import pytest
from agentihooks_operator.recovery import LaunchPlan
from agentihooks_operator.recovery.errors import LaunchBlocked
from agentihooks_operator.recovery.steps.launchwait import CAP_INTERVALS, LaunchWaits
from agentihooks_operator.swarm import SwarmSpec
from testsupport.recovery import MemoryLauncher, swarm_doc, swarm_spec

QUOTA = 'the API server refused the worker Pod: exceeded quota: pods, limited: pods=0 in "team-a"'


class RefusingLauncher(MemoryLauncher):
    """A launcher whose every launch is refused (an admission, a quota) while ``refusing``."""

    def __init__(self) -> None:
        super().__init__()
        self.refusing = True
        self.refused = 0

    def launch(self, plan: LaunchPlan) -> Literal["created", "exists"]:
        if self.refusing:
            with self._lock:
                self.refused += 1
            raise LaunchBlocked(QUOTA, reason="admission")
        return super().launch(plan)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _journal(client, r, eid: str) -> dict:  # type: ignore[no-untyped-def]
    return json.loads(client.hget(r.keys.attempt_journal, eid))["launch"]


def _refused_seat(make):  # type: ignore[no-untyped-def]
    """One seat admitted under a launcher that refuses every launch, with a clock the test moves."""
    launcher, clock, spec = RefusingLauncher(), Clock(), swarm_spec(1)
    r = make(launcher=launcher)
    r._ctx.waits.clock = clock
    assert r.acquire()
    assert r.ensure_seats(spec) == []  # admitted, its launch refused
    return r, launcher, clock, spec


def test_a_blocked_launch_backs_off_and_goes_out_once_fixed(make, client) -> None:  # type: ignore[no-untyped-def]
    r, launcher, clock, spec = _refused_seat(make)
    eid = client.hget(r.keys.seats, "eng-1").decode()
    assert launcher.refused == 1

    # Ten simulated minutes with a pass every second: a pass per second would be 600 refusals.
    tried_at = []
    for _ in range(600):
        clock.t += 1
        before = launcher.refused
        r.reconcile(spec, [])
        if launcher.refused > before:
            tried_at.append(clock.t)
    gaps = [b - a for a, b in zip([1000.0, *tried_at], tried_at, strict=False)]
    interval = spec.recovery.pass_interval_seconds
    cap = CAP_INTERVALS * interval
    assert all(g >= interval / 2 for g in gaps), gaps  # never sooner than half a pass interval
    assert all(g <= cap + 1 for g in gaps), gaps  # never longer than the cap
    assert max(gaps) > 4 * interval, gaps  # the waits grew
    assert 8 <= launcher.refused <= 26, launcher.refused
    assert launcher.created[eid] == 0 and launcher.pods == {}

    entry = _journal(client, r, eid)
    assert entry["status"] == "unknown" and entry["detail"] == QUOTA
    assert entry["tries"] == launcher.refused
    [card] = r.cards(spec)
    assert card.launch_blocked == QUOTA and card.binding == "launch blocked"
    assert card.launch_retry_at == entry["retry_at_ms"] and card.launch_retry_at > entry["at_ms"]

    # Fixed: the launch goes out at the first pass after its wait, once, and never again.
    launcher.refusing = False
    for _ in range(int(cap) + 2):
        clock.t += 1
        r.reconcile(spec, [])
    assert launcher.created[eid] == 1 and eid in launcher.pods
    assert _journal(client, r, eid)["status"] == "ok"
    for _ in range(10):
        clock.t += 100
        r.reconcile(spec, [])
    assert launcher.created[eid] == 1
    assert r.cards(spec) == [] or r.cards(spec)[0].launch_blocked is None


def test_a_changed_spec_or_a_new_holder_tries_at_once(make, client) -> None:  # type: ignore[no-untyped-def]
    r, launcher, clock, spec = _refused_seat(make)
    for _ in range(5):  # five refusals: the next wait is long
        clock.t += 200
        r.reconcile(spec, [])
    assert launcher.refused == 6
    clock.t += 0.1
    r.reconcile(spec, [])
    assert launcher.refused == 6  # waiting

    doc = swarm_doc(1)
    doc["podTemplate"] = {"spec": {"priorityClassName": "batch-low"}}  # the user fixed the template
    changed = SwarmSpec.model_validate(doc)
    assert changed.fingerprint != spec.fingerprint
    r.reconcile(changed, [])
    assert launcher.refused == 7  # tried at once under the new spec
    r.reconcile(changed, [])
    assert launcher.refused == 7  # and waits again

    # Another controller takes the lease over: it has no wait of its own and tries at its first pass.
    r.give_up()
    other = make("ctl-b", launcher=launcher)
    other._ctx.waits.clock = clock
    assert other.acquire()
    other.reconcile(changed, [])
    assert launcher.refused == 8
    eid = client.hget(other.keys.seats, "eng-1").decode()
    assert _journal(client, other, eid)["tries"] == 8  # the count of refusals goes on across holders
    launcher.refusing = False
    clock.t += 1000
    other.reconcile(changed, [])
    assert launcher.created[eid] == 1


@pytest.mark.parametrize("interval", [0.3, 5.0, 30.0])
def test_the_waits_follow_the_pass_interval_and_stop_at_the_cap(interval: float) -> None:
    doc = swarm_doc(1)
    doc["recovery"]["passIntervalSeconds"] = interval
    waits = LaunchWaits(clock=Clock())
    waits.follow(SwarmSpec.model_validate(doc))
    delays = [waits.blocked("exe-1", "k") for _ in range(12)]
    assert interval / 2 <= delays[0] <= interval
    assert all(d <= CAP_INTERVALS * interval for d in delays)
    assert delays[-1] >= CAP_INTERVALS * interval / 2  # reached the cap (jittered within its half)
    assert waits.waiting("exe-1", "k")
    assert not waits.waiting("exe-1", "other spec")  # a changed spec ends the wait
    waits.done("exe-1")
    assert waits.tries("exe-1") == 0 and not waits.waiting("exe-1", "k")
