"""Explicit decisions (API and recorded CLI requests): exact messages, once per attempt, nothing changes."""

from __future__ import annotations

import json
import logging

import pytest
from agentihooks_checkpoint.catalog import EmptyCatalog
from agentihooks_operator.recovery import NO_CHECKPOINT, NOT_PENDING, InvalidInput, RecoveryRefused
from agentihooks_operator.recovery.steps import choices
from testsupport.recovery import dump_keys, observe


def waiting(make, spec, **kw):  # type: ignore[no-untyped-def]
    """A seat whose attempt failed while paused: fenced, released, awaiting a decision."""
    r = make(**kw)
    eid = r.ensure_seats(spec)[0].execution_id
    r.report_session(eid, "sess-1")
    r.report_watermark(eid, 5)
    r.pause()
    report = r.reconcile(spec, observe([(eid, "eng-1", 1)], failed={eid: "oom_killed"}))
    assert report.decisions[0].mode == "recovery_pending"
    return r, eid


def test_resume_without_checkpoint_is_refused_and_the_seat_keeps_waiting(make, client, spec) -> None:  # type: ignore[no-untyped-def]
    r, eid = waiting(make, spec)
    before = dump_keys(client, "*:attempt-recoveries")
    with pytest.raises(RecoveryRefused) as e:
        r.decide(eid, "resume", "operator", spec=spec)
    assert str(e.value) == "no complete compatible checkpoint to resume from" == NO_CHECKPOINT
    assert dump_keys(client, "*:attempt-recoveries") == before
    assert r.awaiting_execution("eng-1") == eid
    assert r.metrics()["refusals_by_reason:no_checkpoint"] == 1


def test_no_store_only_fresh_succeeds(make, spec, launcher) -> None:  # type: ignore[no-untyped-def]
    r, eid = waiting(make, spec, catalog=EmptyCatalog())
    with pytest.raises(RecoveryRefused, match=NO_CHECKPOINT):
        r.decide(eid, "resume", "master@example-1", spec=spec)
    d = r.decide(eid, "fresh", "master@example-1", spec=spec)
    assert d.mode == "fresh" and d.replacement in launcher.pods


def test_resume_picks_newest_complete_compatible(make, spec, checkpoint, launcher) -> None:  # type: ignore[no-untyped-def]
    r, eid = waiting(make, spec)
    checkpoint(eid, session_id="sess-1", checkpoint_id="ckpt-old", sequence=1)
    checkpoint(eid, session_id="sess-1", checkpoint_id="ckpt-new", sequence=2)
    checkpoint(eid, session_id="sess-1", checkpoint_id="ckpt-other-image", sequence=3, key="v0")
    d = r.decide(eid, "resume", "operator", spec=spec)
    assert d.checkpoint == "ckpt-new" and d.directive is not None
    assert d.directive.recovery.value == "native" and d.directive.session_id == "sess-1"
    assert launcher.pods[d.replacement].directive == d.directive  # type: ignore[index]


def test_resume_of_context_checkpoint_is_reconstructed(make, spec, checkpoint) -> None:  # type: ignore[no-untyped-def]
    r, eid = waiting(make, spec)
    built = checkpoint(eid, kind="context")
    d = r.decide(eid, "resume", "operator", spec=spec)
    assert d.directive is not None and d.directive.recovery.value == "reconstructed"
    assert d.directive.session_id is None and d.directive.watermark == built.watermark


def test_incomplete_checkpoint_is_not_offered(make, spec, checkpoint, store) -> None:  # type: ignore[no-untyped-def]
    r, eid = waiting(make, spec)
    built = checkpoint(eid, session_id="sess-1")
    # Remove one listed object: the record stays committed but is no longer complete.
    objects = [p for p in store.root.rglob("*") if p.is_file() and "objects" in p.parts]
    assert objects
    objects[0].unlink()
    with pytest.raises(RecoveryRefused, match=NO_CHECKPOINT):
        r.decide(eid, "resume", "operator", spec=spec)
    assert built.checkpoint_id


def test_fresh_reads_the_task_row_from_the_ledger(make, client, spec, launcher) -> None:  # type: ignore[no-untyped-def]
    r, eid = waiting(make, spec)
    row = json.loads(client.hget(r.keys.ledger_tasks, "task-1"))
    row["text"] = "the task as it reads now"
    client.hset(r.keys.ledger_tasks, "task-1", json.dumps(row))
    d = r.decide(eid, "fresh", "operator", spec=spec)
    plan = launcher.pods[d.replacement]  # type: ignore[index]
    assert plan.task_text == "the task as it reads now" and plan.directive is not None
    assert plan.directive.checkpoint_id is None and plan.generation == 2


def test_same_choice_again_returns_the_same_decision_and_admits_nothing(make, client, spec, launcher) -> None:  # type: ignore[no-untyped-def]
    r, eid = waiting(make, spec)
    first = r.decide(eid, "fresh", "operator", spec=spec)
    before = dump_keys(client)
    again = r.decide(eid, "fresh", "master@example-1", spec=spec)
    assert again.replayed is True and first.replayed is False
    assert (again.replacement, again.checkpoint, again.directive) == (
        first.replacement,
        first.checkpoint,
        first.directive,
    )
    assert dump_keys(client) == before
    assert sum(launcher.created.values()) == 2  # generation 1 and the one replacement
    # after a controller restart too
    restarted = make()
    assert restarted.decide(eid, "fresh", "operator", spec=spec).replacement == first.replacement


def test_other_choice_after_acceptance_is_refused_and_nothing_changes(make, client, spec) -> None:  # type: ignore[no-untyped-def]
    r, eid = waiting(make, spec)
    r.decide(eid, "fresh", "operator", spec=spec)
    keep = ("attempt-recoveries", "attempt-fences", "ledger-tasks", "attempt-records", "seats")
    before = {k: dump_keys(client, f"*:{k}") for k in keep}
    with pytest.raises(RecoveryRefused) as e:
        r.decide(eid, "resume", "operator", spec=spec)
    assert str(e.value) == "no recovery decision is pending for this attempt" == NOT_PENDING
    assert {k: dump_keys(client, f"*:{k}") for k in keep} == before


def test_decision_for_an_attempt_that_is_not_fenced_is_refused(make, spec) -> None:  # type: ignore[no-untyped-def]
    r = make()
    eid = r.ensure_seats(spec)[0].execution_id
    with pytest.raises(RecoveryRefused, match=NOT_PENDING):
        r.decide(eid, "fresh", "operator", spec=spec)
    with pytest.raises(RecoveryRefused, match=NOT_PENDING):
        r.decide("exe-" + "f" * 32, "fresh", "operator", spec=spec)


@pytest.mark.parametrize(
    ("execution_id", "choice", "who", "message"),
    [
        ("eng-1", "fresh", "operator", "not an execution id"),
        ("exe-" + "a" * 32, "restart", "operator", "not a recovery choice"),
        ("exe-" + "a" * 32, "fresh", "", "decided_by"),
    ],
)
def test_bad_input_is_named_and_changes_nothing(make, client, execution_id, choice, who, message) -> None:  # type: ignore[no-untyped-def]
    r = make()
    r.acquire()
    before = dump_keys(client)
    with pytest.raises(InvalidInput, match=message):
        r.decide(execution_id, choice, who)
    with pytest.raises(InvalidInput):
        r.record_request(execution_id, choice, who or "x") if who else r.record_request(
            execution_id, choice, ""
        )
    assert dump_keys(client) == before


def test_a_request_read_between_the_fence_and_the_decision_is_kept_for_a_later_pass(  # type: ignore[no-untyped-def]
    make, client, spec, launcher, caplog
) -> None:
    """The event path has fenced the attempt and not yet written that it waits; the master, seeing the
    fence, records a choice, and a pass of another thread reads it in between. It used to be refused
    ("no recovery decision is pending") and dropped, and the seat waited for a choice already given
    (found by a CI run on the real control plane). Now that pass keeps it and the next one applies it."""
    caplog.set_level(logging.WARNING, logger="agentihooks.recovery")
    during: list[object] = []

    def meanwhile(point: str) -> None:
        if point == "after:fence" and not during:
            assert r.record_request(eid, "fresh", "master@example-1")
            during.append(r.reconcile(spec, obs))  # the attempt is the event path's: skipped

    r = make(faults=meanwhile)
    eid = r.ensure_seats(spec)[0].execution_id
    r.pause()  # the decision waits for a choice
    obs = observe([(eid, "eng-1", 1)], failed={eid: "oom_killed"})
    report = r.recover_one(spec, obs[0])
    assert report is not None and report.fenced == [eid]
    [meantime] = during
    assert meantime.refusals == [] and meantime.decisions == []  # type: ignore[attr-defined]
    assert client.hlen(r.keys.recovery_requests) == 1, "the request was dropped"
    assert r.awaiting_execution("eng-1") == eid
    assert not [m for m in caplog.messages if "was refused" in m]

    later = r.reconcile(spec, obs)
    assert [d.mode for d in later.decisions] == ["fresh"]
    assert client.hlen(r.keys.recovery_requests) == 0
    replacement = later.decisions[0].replacement
    assert dict(launcher.created) == {eid: 1, replacement: 1}
    r.reconcile(spec, obs)
    assert dict(launcher.created) == {eid: 1, replacement: 1}


def test_a_request_for_an_attempt_left_undecided_is_refused_once_it_has_waited_long_enough(  # type: ignore[no-untyped-def]
    make, client, spec, launcher, monkeypatch
) -> None:
    """The wait is bounded: a fenced attempt whose decision step never comes does not keep a request
    forever (here the bound is 0: the first pass past it refuses and drops the request)."""
    monkeypatch.setattr(choices, "KEEP_UNDECIDED_MS", 0)
    held: list[object] = []

    def meanwhile(point: str) -> None:
        if point == "after:fence" and not held:
            assert r.record_request(eid, "fresh", "master@example-1")
            held.append(r.reconcile(spec, obs))

    r = make(faults=meanwhile)
    eid = r.ensure_seats(spec)[0].execution_id
    r.pause()
    obs = observe([(eid, "eng-1", 1)], failed={eid: "oom_killed"})
    r.recover_one(spec, obs[0])
    [refused] = held
    assert [x.reason for x in refused.refusals] == [NOT_PENDING]  # type: ignore[attr-defined]
    assert client.hlen(r.keys.recovery_requests) == 0
    assert dict(launcher.created) == {eid: 1}


def test_recorded_requests_apply_on_the_next_pass_then_drop(make, client, spec, caplog) -> None:  # type: ignore[no-untyped-def]
    r, eid = waiting(make, spec)
    assert r.record_request(eid, "resume", "master@example-1") is True
    assert r.record_request(eid, "resume", "master@example-1") is False, "deduplicated by attempt and choice"
    assert r.record_request(eid, "fresh", "operator") is True
    assert r.awaiting_execution("eng-1") == eid, "recording applies nothing"
    caplog.set_level(logging.WARNING, logger="agentihooks.recovery")
    report = r.reconcile(spec, [])
    # resume was recorded first and is refused (no checkpoint); fresh is accepted.
    assert [x.reason for x in report.refusals] == [NO_CHECKPOINT]
    assert [d.mode for d in report.decisions] == ["fresh"]
    assert (
        f"controller: the recovery request for {eid} was refused: "
        "no complete compatible checkpoint to resume from"
    ) in caplog.messages
    assert client.hlen(r.keys.recovery_requests) == 0
    # a late conflicting request is refused with the pending message, and dropped
    r.record_request(eid, "resume", "master@example-1")
    caplog.clear()
    later = r.reconcile(spec, [])
    assert [x.reason for x in later.refusals] == [NOT_PENDING]
    assert f"controller: the recovery request for {eid} was refused: {NOT_PENDING}" in caplog.messages
    assert client.hlen(r.keys.recovery_requests) == 0
