"""Many failures in one pass: their Kubernetes steps overlap, yet a crash anywhere repeats nothing.

The pass fences every failure first, then advances the attempts on a thread
pool. A crash in one attempt's steps stops the others at their next write
point; a fresh controller then finishes every seat with exactly one fence, one
decision, one replacement launched once and the old Pod retired once.
"""

from __future__ import annotations

import json

import pytest
from agentihooks_operator.recovery import CrashAt, InjectedFault
from testsupport.recovery import observe, swarm_spec

SEATS = 5
STEPS = ["fence", "release_grant", "release_account", "retire", "decide", "launch"]
POINTS = [f"{when}:{step}" for step in STEPS for when in ("before", "after")]


def failed_swarm(make, checkpoint):  # type: ignore[no-untyped-def]
    spec = swarm_spec(SEATS, tag="v1")
    r0 = make()
    plans = r0.ensure_seats(spec)
    for i, plan in enumerate(plans):
        r0.report_session(plan.execution_id, f"sess-{i}")
        checkpoint(plan.execution_id, session_id=f"sess-{i}", task_id=plan.task_id)
    triples = [(p.execution_id, p.seat, 1) for p in plans]
    obs = observe(triples, failed={p.execution_id: "oom_killed" for p in plans})
    return spec, plans, obs


def assert_each_once(r, client, launcher, plans) -> None:  # type: ignore[no-untyped-def]
    m = r.metrics()
    assert client.hlen(r.keys.attempt_fences) == SEATS and m["fences_by_reason:oom_killed"] == SEATS
    assert m["releases:grant"] == SEATS and m["releases:account"] == SEATS
    assert m["decisions_by_choice:resume"] == SEATS and m["admissions:replacement"] == SEATS
    for plan in plans:
        eid = plan.execution_id
        new = json.loads(client.hget(r.keys.attempt_recoveries, eid))["replacement"]
        assert client.hget(r.keys.seats, plan.seat).decode() == new
        assert launcher.created[new] == 1 and launcher.calls.count(("launch", new)) == 1
        assert launcher.calls.count(("retire", eid)) == 1 and eid not in launcher.pods
        assert json.loads(client.hget(r.keys.attempt_journal, new))["launch"]["status"] == "ok"
    assert client.hlen(r.keys.recovery_work) == 0


def test_every_failure_is_replaced_once_and_reported_in_order(make, client, launcher, checkpoint) -> None:  # type: ignore[no-untyped-def]
    spec, plans, obs = failed_swarm(make, checkpoint)
    report = make().reconcile(spec, obs)
    ids = [p.execution_id for p in plans]
    assert report.fenced == ids and report.retired == ids
    assert [d.execution_id for d in report.decisions] == ids
    assert len(report.launches) == SEATS
    assert_each_once(make(), client, launcher, plans)


@pytest.mark.parametrize("point", POINTS)
def test_crash_in_a_concurrent_pass_then_a_fresh_controller_finishes(  # type: ignore[no-untyped-def]
    make, client, launcher, checkpoint, point
) -> None:
    spec, plans, obs = failed_swarm(make, checkpoint)
    with pytest.raises(InjectedFault):
        make(faults=CrashAt(point)).reconcile(spec, obs)
    fresh = make()
    fresh.reconcile(spec, obs)
    fresh.reconcile(spec, obs)
    assert_each_once(fresh, client, launcher, plans)


def test_the_pool_shares_the_attempt_locks_of_the_api_threads(make) -> None:  # type: ignore[no-untyped-def]
    from agentihooks_operator.recovery.fanout import Fanout

    ctx = make()._ctx
    fan = Fanout(ctx)
    assert fan.ctx.lock_for("exe-1") is ctx.lock_for("exe-1")
    ctx._locks = {}  # the original prunes its table: the pool follows it
    assert fan.ctx.lock_for("exe-2") is ctx.lock_for("exe-2")
