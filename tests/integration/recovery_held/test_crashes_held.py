"""A controller killed around every write of holding and resuming: the slot is still released once.

Each test ends with a fresh controller (a restart per pass) and an operator who
looks at the broker and answers truthfully, until the step is ``ok``.
"""

from __future__ import annotations

import json

import pytest
from agentihooks_operator.recovery import CrashAt, InjectedFault
from testsupport.recovery import observe

TTL = 30 * 60 * 1000


def status(client, r, eid):  # type: ignore[no-untyped-def]
    return json.loads(client.hget(r.keys.attempt_journal, eid)).get("release_account", {}).get("status")


def settle(make, spec, obs, broker, clock, client, eid):  # type: ignore[no-untyped-def]
    for _ in range(8):
        r = make()
        r.reconcile(spec, obs)
        live = r.held_recoveries()
        if status(client, r, eid) == "ok" and not live:
            return r
        if not live:
            clock.advance(TTL)
            continue
        token = r.issue_resume_token(live[0].call)
        if token is None:  # still claimed by the resume that died: wait for it to expire
            clock.advance(TTL)
            continue
        truth = "applied" if eid in broker.released else "not_applied"
        r.resume_recovery(live[0].call, token, {"release_account": truth}, spec=spec)
    raise AssertionError("the held step never settled")


def failed_attempt(make, spec):  # type: ignore[no-untyped-def]
    eid = make().ensure_seats(spec)[0].execution_id
    return eid, observe([(eid, "eng-1", 1)], failed={eid: "oom_killed"})


def check_once(r, client, broker, eid) -> None:  # type: ignore[no-untyped-def]
    assert broker.applied[eid] == 1 and broker.total() == 1
    fence = json.loads(client.hget(r.keys.attempt_fences, eid))
    assert fence["released"] == ["grant", "account"]
    assert r.metrics()["releases:account"] == 1
    assert r.held_recoveries() == []


@pytest.mark.parametrize("point", ["before:hold", "after:hold"])
def test_crash_around_holding(make, spec, broker, clock, client, point) -> None:  # type: ignore[no-untyped-def]
    eid, obs = failed_attempt(make, spec)
    broker.mode = "refuse_state"
    with pytest.raises(InjectedFault):
        make(faults=CrashAt(point)).reconcile(spec, obs)
    r = make()
    r.reconcile(spec, obs)
    r.reconcile(spec, obs)
    assert len(r.held_recoveries()) == 1
    assert [e.type for e in r.events(1000)].count("held") == 1
    r = settle(make, spec, obs, broker, clock, client, eid)
    check_once(r, client, broker, eid)


@pytest.mark.parametrize(
    ("mode", "point"),
    [
        ("refuse_state", "before:resume_claim"),
        ("refuse_state", "after:resume_claim"),
        ("refuse_state", "before:broker_release"),
        ("refuse_state", "after:broker_release"),
        ("refuse_state", "before:hold_again"),
        ("refuse_state", "after:hold_again"),
        ("normal", "after:broker_release"),
        ("normal", "before:resume_drop"),
        ("normal", "after:resume_drop"),
    ],
)
def test_crash_inside_a_resume(make, spec, broker, clock, client, mode, point) -> None:  # type: ignore[no-untyped-def]
    eid, obs = failed_attempt(make, spec)
    broker.mode = "refuse_state"
    with pytest.raises(InjectedFault):
        make(faults=CrashAt("before:broker_release")).reconcile(spec, obs)
    r = make()
    r.reconcile(spec, obs)  # unknown, nothing applied, unobservable: held
    [h] = r.held_recoveries()
    assert broker.applied[eid] == 0
    token = r.issue_resume_token(h.call)
    assert token
    broker.mode = mode
    with pytest.raises(InjectedFault):
        make(faults=CrashAt(point)).resume_recovery(
            h.call, token, {"release_account": "not_applied"}, spec=spec
        )
    broker.mode = "refuse_state" if mode == "refuse_state" else "normal"
    r = settle(make, spec, obs, broker, clock, client, eid)
    check_once(r, client, broker, eid)


def test_a_pass_during_a_resume_neither_waits_nor_sends(make, spec, broker, clock, client) -> None:  # type: ignore[no-untyped-def]
    import threading

    eid, obs = failed_attempt(make, spec)
    broker.mode = "refuse_state"
    with pytest.raises(InjectedFault):
        make(faults=CrashAt("before:broker_release")).reconcile(spec, obs)
    r = make()
    r.reconcile(spec, obs)
    [h] = r.held_recoveries()
    token = r.issue_resume_token(h.call)
    assert token
    broker.mode, broker.gate = "normal", threading.Event()
    broker.received.clear()
    answers = []
    t = threading.Thread(
        target=lambda: answers.append(
            r.resume_recovery(h.call, token, {"release_account": "not_applied"}, spec=spec)
        )
    )
    t.start()
    assert broker.received.wait(30)  # the resume's release is at the broker
    r.reconcile(spec, obs)  # the same controller's pass, meanwhile: returns, sends nothing for this attempt
    assert t.is_alive()  # the pass returned while the resume is still at the broker: it did not wait
    assert [x for x in broker.requests if x[0] == "release"] == [("release", eid)]
    broker.gate.set()
    t.join(30)
    assert answers[0].status == "ok"
    check_once(r, client, broker, eid)
