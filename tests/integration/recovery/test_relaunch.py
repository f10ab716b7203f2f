"""A replacement that refused its restore waits for a relaunch; the relaunch is the same directive again.

Real Redis, real checkpoints in a real local store, the in-memory launcher. A
reported refusal keeps the accepted decision: the replacement's exit is not
fenced and nothing new is decided or launched; the card says ``restore
refused: REASON`` with a fix hint. A relaunch (under the lease) admits the
seat's next generation with the same directive and the same fenced attempt to
restore from, so it restores from the original checkpoint; asking again
answers the same relaunch. A controller killed before or after any write of a
relaunch, followed by a fresh one, ends with exactly one relaunch, launched
once, and the refused Pod removed once.
"""

from __future__ import annotations

import json

import pytest
from agentihooks_checkpoint.directive import RestoreOutcome
from agentihooks_operator.recovery import NOT_REFUSED, CrashAt, InjectedFault, RecoveryRefused
from agentihooks_operator.recovery.errors import InvalidInput
from agentihooks_operator.recovery.relaunch import DEFAULT_HINT
from testsupport.recovery import observe, swarm_spec

FIXED_IMAGE = "v2"


def resumed_seat(make, spec, checkpoint):  # type: ignore[no-untyped-def]
    """eng-1 (it held sess-1, archived to record 5) OOM-killed and resumed natively by automation."""
    r = make()
    first = r.ensure_seats(spec)[0].execution_id
    r.report_session(first, "sess-1")
    r.report_watermark(first, 5)
    built = checkpoint(first, session_id="sess-1")
    report = r.reconcile(spec, observe([(first, "eng-1", 1)], failed={first: "oom_killed"}))
    [decision] = report.decisions
    return r, first, built, decision


def refused_seat(make, spec, checkpoint, launcher):  # type: ignore[no-untyped-def]
    """eng-1 OOM-killed, resumed natively, and its replacement refused ``version_changed``."""
    r, first, built, decision = resumed_seat(make, spec, checkpoint)
    refused = decision.replacement
    assert decision.mode == "resume" and refused in launcher.pods
    r.report_refusal(refused, "version_changed", "version_changed")
    return r, first, refused, built, decision


def test_a_reported_refusal_is_not_fenced_and_nothing_new_is_offered(
    make, client, spec, checkpoint, launcher
) -> None:  # type: ignore[no-untyped-def]
    r, first, refused, _built, _decision = refused_seat(make, spec, checkpoint, launcher)
    before = r.metrics()
    # Its worker exits 64; the pass sees a failed Pod (application_exit).
    report = r.reconcile(spec, observe([(refused, "eng-1", 2)], failed={refused: "application_exit"}))
    r.reconcile(spec, observe([(refused, "eng-1", 2)], failed={refused: "application_exit"}))
    assert report.fenced == [] and report.decisions == [] and report.launches == []
    assert client.hget(r.keys.attempt_fences, refused) is None
    assert r.metrics().get("fences_by_reason:application_exit") is None
    assert r.metrics().get("admissions:replacement") == before.get("admissions:replacement")
    assert r.current_execution("eng-1") == refused
    stored = json.loads(client.hget(r.keys.attempt_recoveries, first))
    assert stored["mode"] == "resume" and stored["replacement"] == refused  # the decision stays accepted
    [card] = r.cards(spec)
    assert card.binding == "bound" and card.successor == refused and card.continuity == "pending"
    assert card.reason.endswith("; restore refused: version_changed")
    assert card.restore_refused is not None
    assert card.restore_refused.reason == "version_changed" and card.restore_refused.execution_id == refused
    assert "image" in card.restore_refused.hint and "relaunch" in card.restore_refused.hint
    assert card.awaiting == "recovery_pending" and card.relaunches == 0
    # choosing again returns the same decision and admits nothing
    again = r.decide(first, "resume", "operator", spec=spec)
    assert again.replayed and again.replacement == refused


def test_relaunch_launches_the_same_directive_as_the_next_generation(
    make, client, spec, checkpoint, launcher
) -> None:  # type: ignore[no-untyped-def]
    r, first, refused, built, decision = refused_seat(make, spec, checkpoint, launcher)
    fixed = swarm_spec(1, tag=FIXED_IMAGE)  # the operator set the Swarm's image to one that works
    result = r.relaunch("eng-1", "operator", spec=fixed)
    assert not result.replayed and result.refused == refused and result.generation == 3
    assert result.reason == "version_changed"
    new = result.replacement
    plan = launcher.pods[new]
    assert plan.directive == decision.directive  # the same directive: the original checkpoint, natively
    assert plan.directive is not None and plan.directive.checkpoint_id == built.checkpoint_id
    assert plan.restore_from is not None and plan.restore_from.execution_id == first  # the lineage
    assert plan.generation == 3 and plan.compatibility_key == FIXED_IMAGE
    assert launcher.created[new] == 1 and launcher.retired[refused] == 1  # the refused Pod is removed
    assert r.current_execution("eng-1") == new
    # the refused attempt holds no authority any more, and was never fenced
    record = json.loads(client.hget(r.keys.attempt_records, refused))
    assert record["state"] == "relaunched"
    assert client.hget(r.keys.worker_credentials, refused) is None
    assert json.loads(client.hget(r.keys.launch_grants, refused))["state"] == "revoked"
    assert client.hget(r.keys.attempt_fences, refused) is None
    assert client.hlen(r.keys.recovery_work) == 0
    [card] = r.cards(fixed)
    assert card.successor == new and card.restore_refused is None and card.relaunches == 1
    assert card.reason == f"oom_killed; native resume from {built.checkpoint_id} at record {built.watermark}"
    # asking again (by seat, or naming the refusal) answers the same relaunch
    for kw in ({}, {"refused": refused}):
        again = r.relaunch("eng-1", "operator", spec=fixed, **kw)
        assert again.replayed and again.replacement == new and again.refused == refused
    assert launcher.created[new] == 1 and r.metrics()["relaunches"] == 1
    # the relaunch reports the directive and is stored as the seat's verified outcome
    outcome = RestoreOutcome(execution_id=new, **decision.directive.model_dump())  # type: ignore[union-attr]
    stored = r.report_outcome(new, outcome)
    assert stored.status == "verified" and stored.restored_from == first
    [card] = r.cards(fixed)
    assert card.continuity == "native" and card.awaiting is None
    row = json.loads(client.hget(r.keys.ledger_tasks, "task-1"))
    assert row["held"] is False and row["restores"] == 1


def test_relaunch_without_a_reported_refusal_is_refused(make, spec, checkpoint, launcher) -> None:  # type: ignore[no-untyped-def]
    r = make()
    first = r.ensure_seats(spec)[0].execution_id
    with pytest.raises(RecoveryRefused) as e:
        r.relaunch("eng-1", "operator", spec=spec)
    assert e.value.message == NOT_REFUSED and e.value.reason == "not_refused"
    with pytest.raises(RecoveryRefused):
        r.report_refusal(first, "version_changed", "x")  # generation 1 restores nothing: not a replacement
    assert r.current_execution("eng-1") == first


def test_a_refusal_after_the_outcome_or_of_a_fenced_attempt_is_refused(
    make, spec, checkpoint, launcher
) -> None:  # type: ignore[no-untyped-def]
    r = make()
    first = r.ensure_seats(spec)[0].execution_id
    r.report_session(first, "sess-1")
    checkpoint(first, session_id="sess-1")
    [d] = r.reconcile(spec, observe([(first, "eng-1", 1)], failed={first: "oom_killed"})).decisions
    assert d.directive is not None and d.replacement is not None
    r.report_outcome(d.replacement, RestoreOutcome(execution_id=d.replacement, **d.directive.model_dump()))
    with pytest.raises(RecoveryRefused) as e:
        r.report_refusal(d.replacement, "version_changed", "x")
    assert e.value.reason == "outcome_reported"


def test_relaunch_fresh_when_the_checkpoint_cannot_be_used(make, client, spec, checkpoint, launcher) -> None:  # type: ignore[no-untyped-def]
    r, _first, _refused, _, _ = refused_seat(make, spec, checkpoint, launcher)
    result = r.relaunch("eng-1", "operator", spec=spec, fresh=True)
    plan = launcher.pods[result.replacement]
    assert plan.directive is not None and plan.directive.recovery.value == "fresh"
    assert plan.restore_from is not None and plan.restore_from.execution_id == _first  # still its replacement
    row = json.loads(client.hget(r.keys.ledger_tasks, "task-1"))
    assert row["recovery"]["recovery"] == "fresh" and row["recovery"]["replacement"] == result.replacement
    # a recorded fresh decision, by whoever asked for the relaunch
    decision = json.loads(client.hget(r.keys.attempt_recoveries, _first))
    assert (decision["mode"], decision["replacement"], decision["decided_by"]) == (
        "fresh",
        _refused,
        "operator",
    )
    assert decision["checkpoint"] is None and decision["directive"]["recovery"] == "fresh"
    # and its fresh outcome is accepted (it used to be refused not_replacement)
    outcome = RestoreOutcome(
        execution_id=result.replacement, recovery="fresh", checkpoint_id=None, session_id=None, watermark=None
    )
    stored = r.report_outcome(result.replacement, outcome)
    assert stored.status == "verified" and stored.recovery.value == "fresh"
    [card] = r.cards(spec)
    assert card.continuity == "fresh"
    # issue 47: the master repeating its accepted resume is answered the decision as it stands (the
    # spec: a repeated accepted choice returns the same decision), and nothing new is admitted
    created = dict(launcher.created)
    for choice in ("resume", "fresh"):
        again = r.decide(_first, choice, "operator", spec=spec)
        assert again.replayed and again.replacement == _refused
        assert again.directive is not None and again.directive.recovery.value == "fresh"
    assert launcher.created == created
    assert json.loads(client.hget(r.keys.attempt_recoveries, _first))["accepted_choice"] == "resume"


def test_a_relaunch_keeps_the_decision_as_it_stands(make, client, spec, checkpoint, launcher) -> None:  # type: ignore[no-untyped-def]
    r, first, refused, _built, _ = refused_seat(make, spec, checkpoint, launcher)
    before = json.loads(client.hget(r.keys.attempt_recoveries, first))
    assert before["replacement"] == refused
    result = r.relaunch("eng-1", "operator", spec=swarm_spec(1, tag=FIXED_IMAGE))
    directive = launcher.pods[result.replacement].directive
    assert directive is not None and directive.recovery.value == "native"
    assert directive.checkpoint_id == before["checkpoint"]
    assert (
        json.loads(client.hget(r.keys.attempt_recoveries, first)) == before
    )  # same kind, checkpoint, decider


def test_a_refused_replacement_gives_up_its_authority_at_once(
    make, client, spec, checkpoint, launcher
) -> None:  # type: ignore[no-untyped-def]
    """Its grant, account slot and credential end when the refusal is stored, not at the relaunch."""
    r, first, refused, _, _ = refused_seat(make, spec, checkpoint, launcher)
    assert json.loads(client.hget(r.keys.launch_grants, refused))["state"] == "revoked"
    assert client.hget(r.keys.account_slots, refused) == b"ended"
    assert client.hget(r.keys.worker_credentials, refused) is None
    decision = json.loads(client.hget(r.keys.attempt_recoveries, first))
    assert decision["replacement"] == refused  # kept for the relaunch


@pytest.mark.parametrize(
    ("reason", "token"),
    [
        ("source: the worktree has files but no git repository", "source"),
        ("no checkpoint store is configured for this worker", "no_checkpoint_store"),
    ],
)
def test_the_specs_refusal_strings_are_recorded_as_written(
    make, client, spec, checkpoint, launcher, reason, token
) -> None:  # type: ignore[no-untyped-def]
    """The spec's table writes these two as sentences: the record, the card and the answer keep them;
    only the counter's label is the short token."""
    r, _, _, decision = resumed_seat(make, spec, checkpoint)
    stored = r.report_refusal(decision.replacement, reason, reason)
    assert stored.reason == reason
    assert json.loads(client.hget(r.keys.restore_refusals, decision.replacement))["reason"] == reason
    assert r.metrics()[f"restore_refusals:{token}"] == 1
    [card] = r.cards(spec)
    assert card.restore_refused is not None and card.restore_refused.reason == reason
    assert card.reason.endswith(f"; restore refused: {reason}")
    assert "relaunch" in card.restore_refused.hint and card.restore_refused.hint != DEFAULT_HINT


@pytest.mark.parametrize(
    "reason",
    ["Source: x", "source: ", "source: a\x00b", "source: " + "x" * 300, "no checkpoint store", "a b"],
)
def test_a_refusal_reason_outside_the_table_shapes_is_refused(
    make, client, spec, checkpoint, launcher, reason
) -> None:  # type: ignore[no-untyped-def]
    r, _, _, decision = resumed_seat(make, spec, checkpoint)
    with pytest.raises(InvalidInput):
        r.report_refusal(decision.replacement, reason, "m")
    assert client.hget(r.keys.restore_refusals, decision.replacement) is None


POINTS = [f"{when}:{step}" for step in ("relaunch", "launch", "retire") for when in ("before", "after")]


@pytest.mark.parametrize("point", POINTS)
def test_a_controller_killed_around_a_relaunch_write_then_a_fresh_one(
    make, client, spec, checkpoint, launcher, point
) -> None:  # type: ignore[no-untyped-def]
    _r, _first, refused, built, _decision = refused_seat(make, spec, checkpoint, launcher)
    fixed = swarm_spec(1, tag=FIXED_IMAGE)
    with pytest.raises(InjectedFault):
        make(faults=CrashAt(point)).relaunch("eng-1", "operator", spec=fixed)
    fresh = make()  # the restarted controller (same identity, new epoch)
    current = fresh.current_execution("eng-1")
    obs = observe([(current, "eng-1", 3 if current != refused else 2)])  # type: ignore[list-item]
    fresh.reconcile(fixed, obs)  # finishes what the journal left unknown
    result = fresh.relaunch("eng-1", "operator", spec=fixed)  # the caller asks again
    fresh.reconcile(fixed, observe([(result.replacement, "eng-1", 3)]))
    new = result.replacement
    assert fresh.metrics()["relaunches"] == 1 and fresh.metrics()["admissions:relaunch"] == 1
    assert client.hlen(fresh.keys.attempt_records) == 3
    assert launcher.created[new] == 1 and launcher.calls.count(("launch", new)) == 1
    assert launcher.retired[refused] == 1 and refused not in launcher.pods
    assert json.loads(client.hget(fresh.keys.restore_refusals, refused))["relaunched_as"] == new
    assert json.loads(client.hget(fresh.keys.attempt_journal, new))["launch"]["status"] == "ok"
    journal = json.loads(client.hget(fresh.keys.attempt_journal, refused))
    assert journal["relaunch"]["status"] == "ok" and journal["retire"]["status"] == "ok"
    assert client.hlen(fresh.keys.recovery_work) == 0
    assert client.hget(fresh.keys.attempt_fences, refused) is None
    assert built.checkpoint_id == launcher.pods[new].directive.checkpoint_id  # type: ignore[union-attr]


def test_a_replacement_lost_before_its_first_capture_resumes_from_the_seats_lineage(
    make, client, spec, checkpoint, launcher
) -> None:  # type: ignore[no-untyped-def]
    """Checkpoints are looked up along the lineage: the lost replacement captured none of its own."""
    r = make()
    first = r.ensure_seats(spec)[0].execution_id
    r.report_session(first, "sess-1")
    built = checkpoint(first, session_id="sess-1")
    [d] = r.reconcile(spec, observe([(first, "eng-1", 1)], failed={first: "oom_killed"})).decisions
    second = d.replacement
    assert second is not None
    r.report_session(second, "sess-1")  # it reopened the same conversation, then died before capturing
    report = r.reconcile(spec, observe([(second, "eng-1", 2)], failed={second: "oom_killed"}))
    assert report.fenced == [second]
    [again] = report.decisions
    assert again.mode == "resume" and again.decided_by == "automation"
    assert again.directive is not None and again.directive.recovery.value == "native"
    assert again.checkpoint == built.checkpoint_id
    plan = launcher.pods[again.replacement]  # type: ignore[index]
    assert plan.generation == 3
    assert plan.restore_from is not None and plan.restore_from.execution_id == first  # who captured it
    assert plan.restore_from.execution_generation == 1


def test_without_its_session_the_lineage_checkpoint_is_offered_as_context(make, spec, checkpoint) -> None:  # type: ignore[no-untyped-def]
    r = make()
    first = r.ensure_seats(spec)[0].execution_id
    r.report_session(first, "sess-1")
    built = checkpoint(first, session_id="sess-1")
    [d] = r.reconcile(spec, observe([(first, "eng-1", 1)], failed={first: "oom_killed"})).decisions
    second = d.replacement
    assert second is not None
    r.reconcile(spec, observe([(second, "eng-1", 2)], failed={second: "evicted"}))
    [card] = r.cards(spec)
    assert card.execution_id == second and card.binding == "awaiting decision"
    assert card.resume_available and card.checkpoint == built.checkpoint_id
    assert card.resume_label == "Continue from context"
    result = r.decide(second, "resume", "operator", spec=spec)
    assert result.directive is not None and result.directive.recovery.value == "reconstructed"
