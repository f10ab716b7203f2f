"""The account step against a real HTTP broker in every mode, with controller crashes around the send.

Whatever happens, the broker applies each slot's release exactly once, and the
fence records the release only when it was confirmed or observed.
"""

from __future__ import annotations

import json

import pytest
from agentihooks_operator.recovery import CrashAt, InjectedFault
from testsupport.recovery import observe

POINTS = ["before:broker_release", "after:broker_release"]


def fail_first(make, spec):  # type: ignore[no-untyped-def]
    r = make()
    eid = r.ensure_seats(spec)[0].execution_id
    return eid, observe([(eid, "eng-1", 1)], failed={eid: "oom_killed"})


def fence(client, r, eid):  # type: ignore[no-untyped-def]
    return json.loads(client.hget(r.keys.attempt_fences, eid))


def journal(client, r, eid):  # type: ignore[no-untyped-def]
    return {k: v["status"] for k, v in json.loads(client.hget(r.keys.attempt_journal, eid)).items()}


def test_normal_release_is_confirmed_once(make, spec, broker, client, launcher) -> None:  # type: ignore[no-untyped-def]
    eid, obs = fail_first(make, spec)
    r = make()
    r.reconcile(spec, obs)
    r.reconcile(spec, obs)
    f = fence(client, r, eid)
    assert f["released"] == ["grant", "account"] and f["account_release"] == "confirmed"
    assert broker.applied[eid] == 1 and broker.total() == 1
    assert journal(client, r, eid)["release_account"] == "ok"
    assert launcher.retired[eid] == 1
    # The built-in pool's slot is untouched by an external broker's release only in name: it is ended too.
    assert client.hget(r.keys.account_slots, eid) == b"ended"


def test_dropped_connection_is_observed_not_resent(make, spec, broker, client) -> None:  # type: ignore[no-untyped-def]
    broker.mode = "drop"
    eid, obs = fail_first(make, spec)
    r = make()
    r.reconcile(spec, obs)
    r.reconcile(spec, obs)
    assert broker.applied[eid] == 1
    assert ("state", eid) in broker.requests
    assert fence(client, r, eid)["account_release"] == "observed"
    assert r.held_recoveries() == []


def test_failure_before_applying_is_sent_again_later(make, spec, broker, client) -> None:  # type: ignore[no-untyped-def]
    broker.mode = "fail_before"
    eid, obs = fail_first(make, spec)
    r = make()
    r.reconcile(spec, obs)
    assert broker.applied[eid] == 0
    assert fence(client, r, eid)["released"] == ["grant"]
    assert journal(client, r, eid)["release_account"] == "failed"
    broker.mode = "normal"
    r.reconcile(spec, obs)
    r.reconcile(spec, obs)
    assert broker.applied[eid] == 1
    assert fence(client, r, eid)["released"] == ["grant", "account"]


def test_unobservable_broker_holds_only_that_attempt(make, broker, client, launcher) -> None:  # type: ignore[no-untyped-def]
    from testsupport.broker import with_broker
    from testsupport.recovery import swarm_spec

    spec = with_broker(swarm_spec(2), broker.url)
    r0 = make()
    plans = r0.ensure_seats(spec)
    a, b = plans[0].execution_id, plans[1].execution_id
    broker.mode = "refuse_state"
    r = make()
    report = r.reconcile(spec, observe([(a, "eng-1", 1), (b, "eng-2", 1)], failed={a: "oom_killed"}))
    assert report.held == [a] and report.fenced == [a]
    held = r.held_recoveries()
    assert [(h.execution_id, h.step, h.seat) for h in held] == [(a, "release_account", "eng-1")]
    f = fence(client, r, a)
    assert f["released"] == ["grant"] and f["held"]["step"] == "release_account"
    assert f["held"]["call"] == held[0].call
    assert journal(client, r, a)["release_account"] == "held"
    assert "decide" not in journal(client, r, a)  # the recovery stopped at the step
    assert [e.type for e in r.events()].count("held") == 1
    card = next(c for c in r.cards(spec) if c.execution_id == a)
    assert card.held is not None and card.held.call == held[0].call
    assert card.held.accepts == ["applied", "not_applied"]
    # The other seat goes on: it fails now and is recovered while the first stays held.
    broker.mode = "normal"
    r.reconcile(spec, observe([(a, "eng-1", 1), (b, "eng-2", 1)], failed={a: "oom_killed", b: "evicted"}))
    assert fence(client, r, b)["released"] == ["grant", "account"]
    assert journal(client, r, a)["release_account"] == "held"
    assert broker.applied == {a: 1, b: 1}


@pytest.mark.parametrize("mode", ["normal", "drop", "refuse_state", "fail_before"])
@pytest.mark.parametrize("point", POINTS)
def test_every_mode_across_restarts_releases_once(make, spec, broker, client, mode, point) -> None:  # type: ignore[no-untyped-def]
    eid, obs = fail_first(make, spec)
    broker.mode = mode
    with pytest.raises(InjectedFault):
        make(faults=CrashAt(point)).reconcile(spec, obs)
    if mode == "fail_before":
        broker.mode = "normal"  # the broker recovers; the controller restarts
    for _ in range(3):
        make().reconcile(spec, obs)  # a restart each time
    r = make()
    for h in r.held_recoveries():
        # Only an unobservable broker gets here: the operator looks and answers.
        token = r.issue_resume_token(h.call)
        assert token is not None
        answer = r.resume_recovery(
            h.call,
            token,
            {"release_account": "applied" if eid in broker.released else "not_applied"},
            spec=spec,
        )
        if answer.resume_token is not None:  # sent again and still unobservable: now it was applied
            answer = r.resume_recovery(
                answer.call, answer.resume_token, {"release_account": "applied"}, spec=spec
            )
        assert answer.status == "ok" and answer.resume_token is None
        r.reconcile(spec, obs)
    assert broker.applied[eid] == 1 and broker.total() == 1
    assert fence(client, r, eid)["released"] == ["grant", "account"]
    assert journal(client, r, eid)["release_account"] == "ok"
    assert r.held_recoveries() == []
    assert r.metrics()["releases:account"] == 1


def test_credential_is_sent_and_never_stored(make, spec, broker, client, credential) -> None:  # type: ignore[no-untyped-def]
    eid, obs = fail_first(make, spec)
    make().reconcile(spec, obs)
    assert broker.applied[eid] == 1
    for key in client.keys("*"):
        kind = client.type(key)
        blob = repr(
            client.hgetall(key)
            if kind == b"hash"
            else client.xrange(key)
            if kind == b"stream"
            else client.get(key)
        )
        assert credential not in blob


def test_wrong_credential_is_a_refusal_not_a_release(make, spec, broker, client) -> None:  # type: ignore[no-untyped-def]
    from agentihooks_operator.recovery import HttpBrokers

    eid, obs = fail_first(make, spec)
    r = make(brokers=HttpBrokers(lambda name: "wrong"))
    r.reconcile(spec, obs)
    assert broker.applied[eid] == 0
    assert journal(client, r, eid)["release_account"] == "failed"


def test_built_in_pool_is_released_with_the_fence_and_never_asks_a_broker(make, broker, client) -> None:  # type: ignore[no-untyped-def]
    from testsupport.recovery import swarm_spec

    spec = swarm_spec(1)  # no accountBroker: the built-in pool in Redis
    eid, obs = fail_first(make, spec)
    r = make()
    r.reconcile(spec, obs)
    f = fence(client, r, eid)
    assert f["released"] == ["grant", "account"] and f["account_release"] == "built-in"
    assert client.hget(r.keys.account_slots, eid) == b"ended"
    assert broker.requests == [] and r.held_recoveries() == []
