"""A controller that dies just before or just after any write, then a fresh one finishing the pass.

Whatever the crash point, the end state has exactly one fence, one release of
each kind, one decision, one replacement admitted and launched once, the fenced
Pod retired once, and the ledger row restored once.
"""

from __future__ import annotations

import json

import pytest
from agentihooks_checkpoint.directive import RestoreOutcome
from agentihooks_operator.recovery import CrashAt, InjectedFault
from testsupport.recovery import observe

STEPS = ["fence", "release_grant", "release_account", "retire", "decide", "launch"]
POINTS = [f"{when}:{step}" for step in STEPS for when in ("before", "after")]


def events(r, kind: str) -> int:  # type: ignore[no-untyped-def]
    return sum(1 for e in r.events(1000) if e.type == kind)


def assert_exactly_once(r, client, launcher, eid: str) -> str:  # type: ignore[no-untyped-def]
    m = r.metrics()
    assert client.hlen(r.keys.attempt_fences) == 1 and m["fences_by_reason:oom_killed"] == 1
    assert events(r, "fence") == 1
    fence = json.loads(client.hget(r.keys.attempt_fences, eid))
    assert fence["released"] == ["grant", "account"]
    assert m["releases:grant"] == 1 and m["releases:account"] == 1
    assert client.hlen(r.keys.attempt_recoveries) == 1 and m["decisions_by_choice:resume"] == 1
    assert events(r, "recovery") == 1
    assert m["admissions:replacement"] == 1 and client.hlen(r.keys.attempt_records) == 2
    new = json.loads(client.hget(r.keys.attempt_recoveries, eid))["replacement"]
    assert client.hget(r.keys.seats, "eng-1").decode() == new
    assert launcher.calls.count(("launch", new)) == 1 and launcher.created[new] == 1
    assert launcher.calls.count(("retire", eid)) == 1 and eid not in launcher.pods
    journal = json.loads(client.hget(r.keys.attempt_journal, eid))
    assert {s: journal[s]["status"] for s in journal} == {
        "launch": "ok",  # its own launch as generation 1
        "fence": "ok",
        "hold": "ok",
        "release_grant": "ok",
        "release_account": "ok",
        "retire": "ok",
        "decide": "ok",
    }
    assert json.loads(client.hget(r.keys.attempt_journal, new))["launch"]["status"] == "ok"
    assert client.hlen(r.keys.recovery_work) == 0
    return str(new)


def prepared(make, spec, checkpoint):  # type: ignore[no-untyped-def]
    r0 = make()
    eid = r0.ensure_seats(spec)[0].execution_id
    r0.report_session(eid, "sess-1")
    built = checkpoint(eid, session_id="sess-1")
    return eid, built, observe([(eid, "eng-1", 1)], failed={eid: "oom_killed"})


def finish_outcome(r, client, new: str, built) -> None:  # type: ignore[no-untyped-def]
    outcome = RestoreOutcome.model_validate(
        {
            "execution_id": new,
            "recovery": "native",
            "checkpoint_id": built.checkpoint_id,
            "session_id": "sess-1",
            "watermark": built.watermark,
        }
    )
    r.report_outcome(new, outcome)
    row = json.loads(client.hget(r.keys.ledger_tasks, "task-1"))
    assert row["restores"] == 1 and row["awaiting"] is None
    assert r.metrics()["ledger_restores"] == 1


@pytest.mark.parametrize("point", POINTS)
def test_crash_in_the_pass_then_a_fresh_controller_finishes(
    make, client, spec, checkpoint, launcher, point
) -> None:  # type: ignore[no-untyped-def]
    eid, built, obs = prepared(make, spec, checkpoint)
    crashing = make(faults=CrashAt(point))
    with pytest.raises(InjectedFault):
        crashing.reconcile(spec, obs)
    fresh = make()  # the restarted controller (same identity, new epoch)
    fresh.reconcile(spec, obs)
    fresh.reconcile(spec, obs)  # and once more: nothing left to do, nothing repeated
    new = assert_exactly_once(fresh, client, launcher, eid)
    finish_outcome(fresh, client, new, built)


@pytest.mark.parametrize("point", ["before:outcome", "after:outcome"])
def test_crash_while_storing_the_outcome(make, client, spec, checkpoint, launcher, point) -> None:  # type: ignore[no-untyped-def]
    eid, built, obs = prepared(make, spec, checkpoint)
    make().reconcile(spec, obs)
    crashing = make(faults=CrashAt(point))
    new = assert_exactly_once(crashing, client, launcher, eid)
    with pytest.raises(InjectedFault):
        finish_outcome(crashing, client, new, built)
    fresh = make()
    finish_outcome(fresh, client, new, built)
    assert fresh.restore_outcomes_by_type["native"] == 1


@pytest.mark.parametrize("point", ["before:decide", "after:decide", "before:launch", "after:launch"])
def test_crash_while_applying_an_explicit_decision(make, client, spec, launcher, point) -> None:  # type: ignore[no-untyped-def]
    r0 = make()
    eid = r0.ensure_seats(spec)[0].execution_id
    r0.pause()
    r0.reconcile(spec, observe([(eid, "eng-1", 1)], failed={eid: "oom_killed"}))
    with pytest.raises(InjectedFault):
        make(faults=CrashAt(point)).decide(eid, "fresh", "operator", spec=spec)
    fresh = make()
    d = fresh.decide(eid, "fresh", "operator", spec=spec)
    fresh.reconcile(spec, [])
    assert client.hlen(fresh.keys.attempt_recoveries) == 1
    assert fresh.metrics()["admissions:replacement"] == 1
    assert launcher.created[d.replacement] == 1  # type: ignore[index]
    assert launcher.calls.count(("launch", d.replacement)) == 1
    assert client.hlen(fresh.keys.recovery_work) == 0


@pytest.mark.parametrize("point", ["before:admit", "after:admit", "before:launch", "after:launch"])
def test_crash_while_admitting_generation_one(make, client, spec, launcher, point) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InjectedFault):
        make(faults=CrashAt(point)).ensure_seats(spec)
    fresh = make()
    fresh.ensure_seats(spec)
    fresh.reconcile(spec, [])
    assert client.hlen(fresh.keys.seats) == 1 and client.hlen(fresh.keys.attempt_records) == 1
    eid = client.hget(fresh.keys.seats, "eng-1").decode()
    assert launcher.created[eid] == 1 and launcher.calls.count(("launch", eid)) == 1
    assert fresh.metrics()["admissions:first"] == 1
    assert json.loads(client.hget(fresh.keys.attempt_journal, eid))["launch"]["status"] == "ok"


# -- the event-driven path (``Recovery.recover_one``): the same steps, the same journal -----------
@pytest.mark.parametrize("point", POINTS)
def test_crash_in_the_event_path_then_a_pass_finishes(
    make, client, spec, checkpoint, launcher, point
) -> None:  # type: ignore[no-untyped-def]
    eid, built, obs = prepared(make, spec, checkpoint)
    crashing = make(faults=CrashAt(point))
    assert crashing.acquire()
    with pytest.raises(InjectedFault):
        crashing.recover_one(spec, obs[0])
    fresh = make()
    fresh.reconcile(spec, obs)
    fresh.reconcile(spec, obs)
    new = assert_exactly_once(fresh, client, launcher, eid)
    finish_outcome(fresh, client, new, built)


def test_the_event_path_alone_recovers_and_a_pass_then_repeats_nothing(
    make, client, spec, checkpoint, launcher
) -> None:  # type: ignore[no-untyped-def]
    eid, built, obs = prepared(make, spec, checkpoint)
    r = make()
    assert r.acquire()
    report = r.recover_one(spec, obs[0])
    assert report is not None and report.fenced == [eid] and report.retired == [eid]
    new = assert_exactly_once(r, client, launcher, eid)
    assert report.launches == [new]
    assert r.recover_one(spec, obs[0]) is None, "no longer the seat's current attempt"
    r.reconcile(spec, obs)
    assert_exactly_once(r, client, launcher, eid)
    finish_outcome(r, client, new, built)


def test_a_pass_and_the_event_path_never_advance_one_attempt_at_once(
    make, client, spec, checkpoint, launcher
) -> None:  # type: ignore[no-untyped-def]
    eid, built, obs = prepared(make, spec, checkpoint)
    answers: list[object] = []

    def meanwhile(point: str) -> None:  # the attempt's Pod event arrives while the pass has it
        if point == "after:fence" and not answers:
            answers.append(r.recover_one(spec, obs[0]))

    r = make(faults=meanwhile)
    assert r.acquire()
    r.reconcile(spec, obs)
    assert answers == [None], "the event path left the attempt to the pass that holds it"
    new = assert_exactly_once(r, client, launcher, eid)
    finish_outcome(r, client, new, built)


def test_a_controller_without_the_lease_does_nothing_on_the_event(
    make, client, spec, checkpoint, launcher
) -> None:  # type: ignore[no-untyped-def]
    eid, _, obs = prepared(make, spec, checkpoint)
    applied_before = client.hlen(make().keys.attempt_fences)
    idle = make(holder="ctl-b")  # never acquired: it must not take the lease on an event either
    assert idle.recover_one(spec, obs[0]) is None
    assert client.hlen(idle.keys.attempt_fences) == applied_before == 0
    assert launcher.calls.count(("retire", eid)) == 0
