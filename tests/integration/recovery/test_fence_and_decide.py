"""Fence, releases and the automatic decision, against a real Redis and a real local checkpoint store."""

from __future__ import annotations

import json

import pytest
from agentihooks_checkpoint.catalog import EmptyCatalog
from agentihooks_operator.recovery import FenceRecord
from testsupport.recovery import observe, swarm_spec


def start(make, spec, *, session: str | None = "sess-1", watermark: int | None = 5, **kw):  # type: ignore[no-untyped-def]
    r = make(**kw)
    eid = r.ensure_seats(spec)[0].execution_id
    if session:
        r.report_session(eid, session)
    if watermark is not None:
        r.report_watermark(eid, watermark)
    return r, eid


def fail(r, spec, eid: str, reason: str = "oom_killed", gen: int = 1, **kw):  # type: ignore[no-untyped-def]
    return r.reconcile(spec, observe([(eid, "eng-1", gen)], failed={eid: reason}, **kw))


def fence_of(client, r, eid: str) -> FenceRecord:  # type: ignore[no-untyped-def]
    return FenceRecord.model_validate_json(client.hget(r.keys.attempt_fences, eid))


def decision_of(client, r, eid: str) -> dict:  # type: ignore[no-untyped-def,type-arg]
    return json.loads(client.hget(r.keys.attempt_recoveries, eid))


def test_fence_record_holds_what_the_attempt_had(make, client, spec, checkpoint) -> None:  # type: ignore[no-untyped-def]
    r, eid = start(make, spec, watermark=412)
    report = fail(r, spec, eid, "evicted")
    assert report.fenced == [eid]
    f = fence_of(client, r, eid)
    assert (f.execution_id, f.generation, f.seat, f.reason) == (eid, 1, "eng-1", "evicted")
    assert f.controller_epoch == r.epoch == 1
    assert f.native_session == "sess-1" and f.archive_watermark == 412
    assert "after record 412" in f.tail and "lost" in f.tail
    assert f.released == ["grant", "account"]
    assert json.loads(client.hget(r.keys.launch_grants, eid))["state"] == "revoked"
    assert client.hget(r.keys.account_slots, eid) == b"ended"
    assert json.loads(client.hget(r.keys.attempt_records, eid))["state"] == "fenced"


def test_a_final_capture_leaves_an_empty_tail_only_when_it_is_the_last_watermark(make, client, spec) -> None:  # type: ignore[no-untyped-def]
    """The worker's final capture (its harness had exited) reached record 12: nothing is lost. A final
    report that a later, non-final one overtook (a report is never trusted past what it says) leaves
    the tail named after the newer watermark."""
    r, eid = start(make, spec, watermark=9)
    r.report_watermark(eid, 12, final=True)
    fail(r, spec, eid, "evicted")
    f = fence_of(client, r, eid)
    assert (f.archive_watermark, f.final_capture) == (12, True)
    assert f.tail == "Nothing is lost: the final capture archived the transcript through record 12."
    beat = json.loads(client.hget(r.keys.heartbeats, eid))
    assert (beat["archive_watermark"], beat["final_watermark"]) == (12, 12)


def test_a_final_report_overtaken_by_a_newer_watermark_leaves_the_tail_named(make, client, spec) -> None:  # type: ignore[no-untyped-def]
    r2, eid2 = start(make, spec, watermark=3)
    r2.report_watermark(eid2, 4, final=True)
    r2.report_watermark(eid2, 6)
    fail(r2, spec, eid2, "evicted")
    f2 = fence_of(client, r2, eid2)
    assert (f2.archive_watermark, f2.final_capture) == (6, False)
    assert "after record 6" in f2.tail and "lost" in f2.tail


def test_a_final_report_names_its_watermark(make, spec) -> None:  # type: ignore[no-untyped-def]
    from agentihooks_operator.recovery.errors import InvalidInput
    from agentihooks_operator.recovery.outcomes import heartbeat

    r, eid = start(make, spec)
    with pytest.raises(InvalidInput, match="final"):
        heartbeat(r._ctx, eid, session_id="s", watermark=None, final=True)


def test_image_pull_tail_says_nothing_was_written(make, client, spec) -> None:  # type: ignore[no-untyped-def]
    r, eid = start(make, spec, session=None, watermark=None)
    fail(r, spec, eid, "image_pull")
    tail = fence_of(client, r, eid).tail
    assert "never started" in tail


def test_second_fence_of_the_same_attempt_returns_the_first(make, client, spec) -> None:  # type: ignore[no-untyped-def]
    r, eid = start(make, spec)
    r.pause()
    fail(r, spec, eid, "oom_killed")
    first = client.hget(r.keys.attempt_fences, eid)
    again = fail(r, spec, eid, "node_lost")
    assert again.fenced == []
    assert client.hget(r.keys.attempt_fences, eid) == first
    assert [e.type for e in r.events()].count("fence") == 1
    assert r.metrics()["releases:grant"] == 1 and r.metrics()["releases:account"] == 1


def test_only_the_current_attempt_is_fenced(make, client, spec) -> None:  # type: ignore[no-untyped-def]
    r, eid = start(make, spec)
    # A Pod claiming another generation of the current attempt is stale.
    stale = r.reconcile(spec, observe([(eid, "eng-1", 7)], failed={eid: "oom_killed"}))
    assert stale.fenced == [] and stale.skipped_stale == [eid]
    assert client.hget(r.keys.attempt_fences, eid) is None
    # An attempt that is not the seat's current one is ignored.
    other = "exe-" + "0" * 32
    assert r.reconcile(spec, observe([(other, "eng-1", 1)], failed={other: "oom_killed"})).fenced == []


def test_fenced_attempt_keeps_no_authority(make, client, spec) -> None:  # type: ignore[no-untyped-def]
    from agentihooks_operator.recovery import RecoveryRefused

    r = make()
    plan = r.ensure_seats(spec)[0]
    eid = plan.execution_id
    token = plan.worker_token.get_secret_value()
    assert r.check_worker_credential(eid, token) is True
    assert client.hget(r.keys.worker_credentials, eid) != token.encode(), "only a hash is stored"
    r.pause()
    fail(r, spec, eid)
    assert r.check_worker_credential(eid, token) is False
    with pytest.raises(RecoveryRefused):
        r.report_watermark(eid, 9)
    with pytest.raises(RecoveryRefused):
        r.mint_worker_credential(eid)
    assert json.loads(client.hget(r.keys.launch_grants, eid))["state"] == "revoked"


def test_native_resume_without_asking(make, client, spec, checkpoint, launcher) -> None:  # type: ignore[no-untyped-def]
    r, eid = start(make, spec)
    built = checkpoint(eid, session_id="sess-1")
    report = fail(r, spec, eid)
    (d,) = report.decisions
    assert d.mode == "resume" and d.decided_by == "automation"
    assert d.directive is not None and d.directive.recovery.value == "native"
    assert d.directive.session_id == "sess-1" and d.directive.checkpoint_id == built.checkpoint_id
    assert d.directive.watermark == built.watermark
    new = d.replacement
    assert new is not None and report.launches == [new]
    plan = launcher.pods[new]
    assert plan.generation == 2 and plan.seat == "eng-1" and plan.directive == d.directive
    assert plan.restore_from is not None and plan.restore_from.execution_id == eid
    assert client.hget(r.keys.seats, "eng-1").decode() == new
    assert eid not in launcher.pods, "the fenced Pod was retired"
    row = json.loads(client.hget(r.keys.ledger_tasks, "task-1"))
    assert row["awaiting"] == "recovery_pending"
    assert row["recovery"]["status"] == "accepted" and row["recovery"]["recovery"] == "native"


@pytest.mark.parametrize(
    ("why", "setup"),
    [
        ("image_pull", {"reason": "image_pull"}),
        ("no session", {"session": None}),
        ("context-only checkpoint", {"kind": "context"}),
        ("automation off", {"automation": False}),
        ("paused", {"paused": True}),
        ("other image tag", {"key": "v0"}),
    ],
)
def test_the_seat_waits_unless_every_condition_holds(make, client, checkpoint, why, setup) -> None:  # type: ignore[no-untyped-def]
    spec = swarm_spec(1, tag="v1", automation=setup.get("automation", True))
    r, eid = start(make, spec, session=setup.get("session", "sess-1"))
    checkpoint(eid, kind=setup.get("kind", "claude"), session_id="sess-1", key=setup.get("key", "v1"))
    if setup.get("paused"):
        r.pause()
    report = fail(r, spec, eid, setup.get("reason", "oom_killed"))
    (d,) = report.decisions
    assert d.mode == "recovery_pending", why
    assert report.launches == []
    assert decision_of(client, r, eid)["mode"] == "recovery_pending"
    assert r.awaiting_execution("eng-1") == eid


def test_no_store_means_every_failure_waits(make, spec) -> None:  # type: ignore[no-untyped-def]
    r, eid = start(make, spec, catalog=EmptyCatalog())
    assert fail(r, spec, eid).decisions[0].mode == "recovery_pending"


def test_superseded_legacy_spawn_is_replaced_fresh(make, client, spec, launcher) -> None:  # type: ignore[no-untyped-def]
    r, eid = start(make, spec, session=None)
    report = fail(r, spec, eid, "application_exit", legacy={eid})
    (d,) = report.decisions
    assert d.mode == "fresh" and d.directive is not None and d.directive.recovery.value == "fresh"
    assert d.checkpoint is None and launcher.pods[d.replacement].task_text == "do thing 1"  # type: ignore[index]


@pytest.mark.parametrize("paused", [True, False])
def test_superseded_legacy_waits_when_paused_or_automation_off(make, paused) -> None:  # type: ignore[no-untyped-def]
    spec = swarm_spec(1, tag="v1", automation=paused)
    r, eid = start(make, spec, session=None)
    if paused:
        r.pause()
    assert fail(r, spec, eid, legacy={eid}).decisions[0].mode == "recovery_pending"


def test_telemetry_records_fence_and_recovery_events(make, spec, checkpoint) -> None:  # type: ignore[no-untyped-def]
    r, eid = start(make, spec)
    checkpoint(eid, session_id="sess-1")
    fail(r, spec, eid)
    fence, recovery = [e for e in r.events() if e.execution_id == eid]
    assert fence.type == "fence" and fence.detail == "oom_killed"
    assert (fence.expected_generation, fence.observed_generation, fence.epoch) == (1, 1, 1)
    assert recovery.type == "recovery" and recovery.detail.startswith("resume (native)")
    assert recovery.epoch == 1 and recovery.observed_generation == 1
    m = r.metrics()
    assert m["fences_by_reason:oom_killed"] == 1
    assert m["decisions_by_choice:resume"] == 1 and m["decisions_by_decider:automation"] == 1


def test_event_stream_is_bounded(make, client, spec) -> None:  # type: ignore[no-untyped-def]
    from agentihooks_operator.recovery.store import writer

    r, eid = start(make, spec)
    old = writer.EVENTS_MAXLEN
    writer.EVENTS_MAXLEN = 5
    try:
        spec2 = swarm_spec(1, tag="v1")
        for _ in range(300):
            client.xadd(r.keys.recovery_events, {"type": "fence"})
        fail(r, spec2, eid)
    finally:
        writer.EVENTS_MAXLEN = old
    assert client.xlen(r.keys.recovery_events) < 300


def test_gone_pod_is_fenced_as_node_lost_and_succeeded_is_left_alone(make, client) -> None:  # type: ignore[no-untyped-def]
    from agentihooks_operator.recovery import AttemptObservation

    spec = swarm_spec(2, tag="v1")
    r = make()
    plans = {p.seat: p.execution_id for p in r.ensure_seats(spec)}
    r.pause()
    obs = [
        AttemptObservation(execution_id=plans["eng-1"], seat="eng-1", generation=1, state="gone"),
        AttemptObservation(execution_id=plans["eng-2"], seat="eng-2", generation=1, state="succeeded"),
    ]
    report = r.reconcile(spec, obs)
    assert report.fenced == [plans["eng-1"]]
    assert fence_of(client, r, plans["eng-1"]).reason == "node_lost"
    assert client.hget(r.keys.attempt_fences, plans["eng-2"]) is None


def test_a_native_replacement_that_never_started_holds_the_session_it_was_to_reopen(  # type: ignore[no-untyped-def]
    make, client, spec, checkpoint, launcher
) -> None:
    """Attempt 1 is resumed natively on its own; its replacement's image never starts (it reports
    nothing) and is fenced ``image_pull``. That replacement held the session it was launched to
    reopen, so the card offers "Resume native" and a resume is native again: before, its fence named
    no session and the resume fell back to context continuation (found on the real node)."""
    r, eid = start(make, spec)
    checkpoint(eid, session_id="sess-1")
    (d,) = fail(r, spec, eid).decisions
    second = d.replacement
    assert second is not None and d.directive is not None and d.directive.recovery.value == "native"
    report = fail(r, spec, second, "image_pull", gen=2)
    (waiting,) = report.decisions
    assert waiting.mode == "recovery_pending" and report.launches == []  # a pull failure always asks
    assert fence_of(client, r, second).native_session == "sess-1"
    assert r.record_request(second, "resume", "operator")
    (third,) = r.reconcile(spec, observe([(second, "eng-1", 2)], failed={second: "image_pull"})).decisions
    assert third.directive is not None and third.directive.recovery.value == "native", third
    assert third.directive.session_id == "sess-1"
