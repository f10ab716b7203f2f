"""Resuming held recoveries through the core: answers, records, expiry, the bound, rules applied again."""

from __future__ import annotations

import json

import pytest
from agentihooks_operator.recovery import CrashAt, InjectedFault, LeaseLost, ResumeRefused
from testsupport.broker import broken_brokers, with_broker
from testsupport.recovery import FixedCatalog, observe, summary, swarm_spec

TTL = 30 * 60 * 1000


def held_one(make, spec, broker, **kw):  # type: ignore[no-untyped-def]
    r = make(**kw)
    eid = r.ensure_seats(spec)[0].execution_id
    broker.mode = "refuse_state"
    obs = observe([(eid, "eng-1", 1)], failed={eid: "oom_killed"})
    r.reconcile(spec, obs)
    [h] = r.held_recoveries()
    return r, eid, h, obs


def code(e: pytest.ExceptionInfo[ResumeRefused]) -> str:
    return e.value.code


def test_applied_is_recorded_once_without_sending(make, spec, broker, client) -> None:  # type: ignore[no-untyped-def]
    r, eid, h, _obs = held_one(make, spec, broker)
    token = r.issue_resume_token(h.call)
    assert token is not None and len(token) == 32  # 24 random bytes, URL-safe base64
    sent_before = len(broker.requests)
    answer = r.resume_recovery(h.call, token, {"release_account": "applied"}, spec=spec)
    assert len(broker.requests) == sent_before  # nothing reached the broker
    assert answer.status == "ok" and answer.resume_token is None
    assert {s.path: s.status for s in answer.progress} == {
        "fence": "ok",
        "release_grant": "ok",
        "release_account": "ok",
        "retire": "ok",
        "decide": "ok",
    }
    assert [s.resumed for s in answer.progress][:2] == ["kept", "kept"]
    steps = [e for e in r.events(1000) if e.type == "step"]
    account = [e for e in steps if e.path == "release_account"]
    assert len(account) == 1
    assert (account[0].parent_call, account[0].resumed, account[0].observed, account[0].sent) == (
        h.call,
        True,
        "applied",
        False,
    )
    assert {e.path for e in steps} == {"release_account", "retire", "decide"}
    assert all(e.parent_call == h.call and e.resumed for e in steps)
    fence = json.loads(client.hget(r.keys.attempt_fences, eid))
    assert fence["released"] == ["grant", "account"] and fence["account_release"] == "reported"
    assert "held" not in fence or fence["held"] is None
    assert r.held_recoveries() == []
    assert broker.applied[eid] == 1  # the one release that was applied before it was held
    # The call is finished: resuming it again finds nothing.
    with pytest.raises(ResumeRefused) as e:
        r.resume_recovery(h.call, token, {"release_account": "applied"}, spec=spec)
    assert code(e) == "checkpoint_not_found"
    # No token in any key, record or event.
    for key in client.keys("*"):
        kind = client.type(key)
        blob = (
            client.hgetall(key)
            if kind == b"hash"
            else client.xrange(key)
            if kind == b"stream"
            else client.get(key)
        )
        assert token not in repr(blob)


def test_not_applied_sends_again_and_unobservable_holds_again_with_a_new_token(make, spec, broker) -> None:  # type: ignore[no-untyped-def]
    broker.mode = "fail_before"
    r = make()
    eid = r.ensure_seats(spec)[0].execution_id
    obs = observe([(eid, "eng-1", 1)], failed={eid: "oom_killed"})
    r.reconcile(spec, obs)  # 500, observed active: failed, nothing applied
    broker.mode = "refuse_state"
    r.reconcile(spec, obs)  # sent again: applied, connection dropped, unobservable: held
    [h] = r.held_recoveries()
    assert broker.applied[eid] == 1
    first = r.issue_resume_token(h.call)
    second = r.issue_resume_token(h.call)
    assert first and second and first != second
    with pytest.raises(ResumeRefused) as e:
        r.resume_recovery(h.call, first, {"release_account": "applied"}, spec=spec)
    assert code(e) == "resume_token_invalid"  # the older token stopped working
    with pytest.raises(ResumeRefused) as e:
        r.resume_recovery(h.call, second, {}, spec=spec)
    assert code(e) == "observed_required" and e.value.steps[0]["step"] == "release_account"


def test_not_applied_resend_then_held_again(make, spec, broker) -> None:  # type: ignore[no-untyped-def]
    # Held before anything was applied: the crash hit between the unknown mark and the send.
    r = make()
    eid = r.ensure_seats(spec)[0].execution_id
    obs = observe([(eid, "eng-1", 1)], failed={eid: "oom_killed"})
    broker.mode = "refuse_state"
    with pytest.raises(InjectedFault):
        make(faults=CrashAt("before:broker_release")).reconcile(spec, obs)
    r = make()
    r.reconcile(spec, obs)
    [h] = r.held_recoveries()
    assert broker.applied[eid] == 0
    token = r.issue_resume_token(h.call)
    assert token
    answer = r.resume_recovery(h.call, token, {"release_account": "not_applied"}, spec=spec)
    assert broker.applied[eid] == 1
    assert answer.status == "held" and answer.call == h.call and answer.resume_token not in (None, token)
    sent = [e for e in r.events(1000) if e.type == "step" and e.path == "release_account"]
    assert [(e.observed, e.sent) for e in sent] == [("not_applied", True)]
    with pytest.raises(ResumeRefused) as e:
        r.resume_recovery(h.call, token, {"release_account": "applied"}, spec=spec)
    assert code(e) == "resume_token_invalid"
    done = r.resume_recovery(h.call, str(answer.resume_token), {"release_account": "applied"}, spec=spec)
    assert done.status == "ok" and broker.applied[eid] == 1


def test_expiry_follows_the_clock_and_the_step_is_held_again(make, spec, broker, clock) -> None:  # type: ignore[no-untyped-def]
    r, eid, h, obs = held_one(make, spec, broker)
    token = r.issue_resume_token(h.call)
    assert token
    clock.advance(TTL - 1)
    assert [x.call for x in r.held_recoveries()] == [h.call]
    clock.advance(1)
    assert r.held_recoveries() == []
    with pytest.raises(ResumeRefused) as e:
        r.resume_recovery(h.call, token, {"release_account": "applied"}, spec=spec)
    assert code(e) == "checkpoint_not_found"
    r.reconcile(spec, obs)  # the step is still held: a new record (new call) opens for it
    [again] = r.held_recoveries()
    assert again.execution_id == eid and again.call != h.call
    assert broker.applied[eid] == 1


def test_at_most_twenty_per_swarm_oldest_dropped(make, broker, clock) -> None:  # type: ignore[no-untyped-def]
    spec = with_broker(swarm_spec(21), broker.url)
    r = make()
    plans = r.ensure_seats(spec)
    broker.mode = "refuse_state"
    ids = [(p.execution_id, p.seat, 1) for p in plans]
    for n, _p in enumerate(plans):  # one failure per pass, so their order is known
        clock.advance(1)
        r.reconcile(spec, observe(ids[: n + 1], failed={x[0]: "oom_killed" for x in ids[: n + 1]}))
    live = r.held_recoveries()
    assert len(live) == 20
    assert plans[0].execution_id not in {h.execution_id for h in live}
    assert r.metrics()["held:dropped"] == 1
    everything = observe(ids, failed={x[0]: "oom_killed" for x in ids})
    r.reconcile(spec, everything)  # full: the dropped one is not reopened (no churn)
    assert {h.call for h in r.held_recoveries()} == {h.call for h in live}
    oldest = live[0]
    token = r.issue_resume_token(oldest.call)
    assert token
    r.resume_recovery(oldest.call, token, {"release_account": "applied"}, spec=spec)
    r.reconcile(spec, everything)  # room again: the first attempt's step gets a record
    assert plans[0].execution_id in {h.execution_id for h in r.held_recoveries()}
    assert sum(broker.applied.values()) == 21


def test_resume_obeys_the_pause_switch(make, broker, client) -> None:  # type: ignore[no-untyped-def]
    spec0 = swarm_spec(1)
    r0 = make()
    # A native checkpoint exists, so an unpaused swarm would resume on its own.
    plan = r0.ensure_seats(with_broker(spec0, broker.url))[0]
    catalog = FixedCatalog([summary(plan.execution_id)])
    spec = with_broker(spec0, broker.url)
    r = make(catalog=catalog)
    r.report_session(plan.execution_id, "sess-1")
    broker.mode = "refuse_state"
    r.reconcile(spec, observe([(plan.execution_id, "eng-1", 1)], failed={plan.execution_id: "oom_killed"}))
    [h] = r.held_recoveries()
    r.pause()
    token = r.issue_resume_token(h.call)
    assert token
    answer = r.resume_recovery(h.call, token, {"release_account": "applied"}, spec=spec)
    assert answer.status == "ok"
    decision = json.loads(client.hget(r.keys.attempt_recoveries, plan.execution_id))
    assert decision["mode"] == "recovery_pending"  # paused: no replacement launched on its own


def test_a_controller_without_the_lease_changes_nothing(make, spec, broker, client) -> None:  # type: ignore[no-untyped-def]
    r, _eid, h, _obs = held_one(make, spec, broker)
    token = r.issue_resume_token(h.call)
    assert token
    client.delete(r.keys.control_owner)
    assert make(holder="ctl-b").acquire()
    before = client.hget(r.keys.held_recoveries, h.call)
    with pytest.raises(LeaseLost):
        r.resume_recovery(h.call, token, {"release_account": "applied"}, spec=spec)
    assert client.hget(r.keys.held_recoveries, h.call) == before


def test_plan_changed_when_the_broker_moved(make, spec, broker) -> None:  # type: ignore[no-untyped-def]
    r, eid, h, _obs = held_one(make, spec, broker)
    token = r.issue_resume_token(h.call)
    assert token
    moved = with_broker(spec, "http://127.0.0.1:9")
    with pytest.raises(ResumeRefused) as e:
        r.resume_recovery(h.call, token, {"release_account": "not_applied"}, spec=moved)
    assert code(e) == "plan_changed" and e.value.status == 409
    assert broker.applied[eid] == 1 and [x.call for x in r.held_recoveries()] == [h.call]


def test_internal_error_is_resume_failed_and_drops_the_record(make, spec, broker, client) -> None:  # type: ignore[no-untyped-def]
    _r, eid, h, obs = held_one(make, spec, broker)
    token = make().issue_resume_token(h.call)
    assert token
    crashing = make(brokers=broken_brokers)
    answer = crashing.resume_recovery(h.call, token, {"release_account": "not_applied"}, spec=spec)
    assert answer.error == "resume_failed" and answer.resume_token is None
    assert {s.path: s.status for s in answer.progress}["release_account"] == "unknown"
    assert crashing.held_recoveries() == []
    with pytest.raises(ResumeRefused) as e:
        crashing.resume_recovery(h.call, token, {"release_account": "applied"}, spec=spec)
    assert code(e) == "checkpoint_not_found"
    fresh = make()
    fresh.reconcile(spec, obs)  # unknown, unobservable: held again under a new call
    [again] = fresh.held_recoveries()
    assert again.call != h.call and broker.applied[eid] == 1
