"""Outcomes, the ledger hold, the pause switch and the handoff cards."""

from __future__ import annotations

import json

import pytest
from agentihooks_checkpoint.directive import RestoreOutcome
from agentihooks_operator.recovery import RecoveryRefused
from testsupport.recovery import dump_keys, observe


def resumed(make, spec, checkpoint):  # type: ignore[no-untyped-def]
    """A native resume accepted automatically; returns (recovery, fenced id, replacement id, checkpoint)."""
    r = make()
    eid = r.ensure_seats(spec)[0].execution_id
    r.report_session(eid, "sess-1")
    r.report_watermark(eid, 400)
    built = checkpoint(eid, session_id="sess-1")
    report = r.reconcile(spec, observe([(eid, "eng-1", 1)], failed={eid: "oom_killed"}))
    new = report.decisions[0].replacement
    return r, eid, new, built


def native(new: str, built, **kw) -> RestoreOutcome:  # type: ignore[no-untyped-def]
    data = {
        "execution_id": new,
        "recovery": "native",
        "checkpoint_id": built.checkpoint_id,
        "session_id": "sess-1",
        "watermark": built.watermark,
    }
    data.update(kw)
    return RestoreOutcome.model_validate(data)


def ledger(client, r) -> dict:  # type: ignore[no-untyped-def,type-arg]
    return json.loads(client.hget(r.keys.ledger_tasks, "task-1"))


def test_outcome_is_stored_verified_and_the_task_is_released_once(make, client, spec, checkpoint) -> None:  # type: ignore[no-untyped-def]
    r, eid, new, built = resumed(make, spec, checkpoint)
    assert ledger(client, r)["awaiting"] == "recovery_pending"
    stored = r.report_outcome(new, native(new, built))
    assert stored.status == "verified" and stored.recovery.value == "native"
    assert stored.archive_watermark == 400 and stored.watermark == built.watermark
    assert stored.restored_from == eid
    row = ledger(client, r)
    assert row["awaiting"] is None and row["held"] is False and row["restores"] == 1
    assert row["recovery"]["status"] == "verified" and row["recovery"]["archive_watermark"] == 400
    assert r.restore_outcomes_by_type == {"native": 1, "reconstructed": 0, "fresh": 0}
    before = dump_keys(client)
    assert r.report_outcome(new, native(new, built)) == stored, "identical repeat returns the stored one"
    assert dump_keys(client) == before
    assert r.metrics()["ledger_restores"] == 1


def test_prior_awaiting_value_is_written_back(make, client, spec, checkpoint) -> None:  # type: ignore[no-untyped-def]
    r = make()
    eid = r.ensure_seats(spec)[0].execution_id
    row = ledger(client, r)
    row["awaiting"] = "review"
    client.hset(r.keys.ledger_tasks, "task-1", json.dumps(row))
    r.pause()
    r.reconcile(spec, observe([(eid, "eng-1", 1)], failed={eid: "oom_killed"}))
    assert ledger(client, r)["awaiting"] == "recovery_pending"
    d = r.decide(eid, "fresh", "operator", spec=spec)
    assert ledger(client, r)["recovery"]["status"] == "accepted"
    r.report_outcome(d.replacement, RestoreOutcome(execution_id=d.replacement, recovery="fresh"))  # type: ignore[arg-type]
    assert ledger(client, r)["awaiting"] == "review"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"recovery": "reconstructed", "session_id": None}, "does not match"),
        ({"checkpoint_id": "ckpt-999"}, "does not match"),
        ({"session_id": "sess-2"}, "does not match"),
    ],
)
def test_outcome_must_equal_the_directive(make, client, spec, checkpoint, change, message) -> None:  # type: ignore[no-untyped-def]
    r, _, new, built = resumed(make, spec, checkpoint)
    before = dump_keys(client)
    with pytest.raises(RecoveryRefused, match=message):
        r.report_outcome(new, native(new, built, **change))
    assert dump_keys(client) == before


def test_outcome_only_from_the_replacement_itself(make, client, spec, checkpoint) -> None:  # type: ignore[no-untyped-def]
    r, eid, new, built = resumed(make, spec, checkpoint)
    with pytest.raises(RecoveryRefused, match="own execution"):
        r.report_outcome(eid, native(new, built))
    with pytest.raises(RecoveryRefused, match="not a replacement"):
        r.report_outcome(eid, native(eid, built))


def test_outcome_refused_once_the_replacement_is_no_longer_current(make, client, spec, checkpoint) -> None:  # type: ignore[no-untyped-def]
    r, _, new, built = resumed(make, spec, checkpoint)
    r.pause()
    r.reconcile(spec, observe([(new, "eng-1", 2)], failed={new: "evicted"}))
    with pytest.raises(RecoveryRefused, match="no longer the seat's current attempt"):
        r.report_outcome(new, native(new, built))
    assert ledger(client, r)["awaiting"] == "recovery_pending", "still held"


def test_different_second_outcome_is_refused(make, client, spec, checkpoint) -> None:  # type: ignore[no-untyped-def]
    r, _, new, built = resumed(make, spec, checkpoint)
    r.report_outcome(new, native(new, built))
    before = dump_keys(client)
    with pytest.raises(RecoveryRefused, match="different outcome"):
        r.report_outcome(new, native(new, built, watermark=1))
    assert dump_keys(client) == before


def test_pause_holds_the_controllers_epoch_and_survives_a_restart(make, client, spec) -> None:  # type: ignore[no-untyped-def]
    r = make()
    r.acquire()
    r.pause()
    assert client.get(r.keys.recovery_paused) == b"1"
    restarted = make()
    assert restarted.paused() is True
    eid = restarted.ensure_seats(spec)[0].execution_id
    report = restarted.reconcile(spec, observe([(eid, "eng-1", 1)], failed={eid: "oom_killed"}))
    assert report.paused is True and report.fenced == [eid] and report.launches == []
    restarted.unpause()
    assert restarted.paused() is False


def test_cards_while_waiting_and_after_the_outcome(make, client, spec, checkpoint) -> None:  # type: ignore[no-untyped-def]
    r = make()
    eid = r.ensure_seats(spec)[0].execution_id
    r.report_session(eid, "sess-1")
    r.pause()
    r.reconcile(spec, observe([(eid, "eng-1", 1)], failed={eid: "oom_killed"}))
    (card,) = r.cards(spec)
    assert card.binding == "awaiting decision" and card.resume_available is False
    assert card.reason == "oom_killed" and card.continuity == "pending" and card.checkpoint is None
    assert card.awaiting == "recovery_pending" and card.successor is None
    built = checkpoint(eid, session_id="sess-1", watermark=4)
    (card,) = r.cards(spec)
    assert card.resume_available is True and card.resume_label == "Resume native"
    assert card.checkpoint == built.checkpoint_id
    assert card.reason == f"oom_killed; native resume from {built.checkpoint_id} at record 4"
    d = r.decide(eid, "resume", "operator", spec=spec)
    (card,) = r.cards(spec)
    assert card.binding == "bound" and card.successor == d.replacement and card.bound_at
    assert card.continuity == "pending"
    r.report_outcome(d.replacement, native(d.replacement, built))  # type: ignore[arg-type]
    (card,) = r.cards(spec)
    assert card.continuity == "native" and card.awaiting is None


def test_card_says_continue_from_context_without_a_session(make, spec, checkpoint) -> None:  # type: ignore[no-untyped-def]
    r = make()
    eid = r.ensure_seats(spec)[0].execution_id
    r.reconcile(spec, observe([(eid, "eng-1", 1)], failed={eid: "node_lost"}))
    checkpoint(eid, session_id="sess-9", watermark=3)
    (card,) = r.cards(spec)
    assert card.resume_label == "Continue from context"
    assert card.reason.startswith("node_lost; continue from context from ")


def test_a_stored_directive_whose_fields_disagree_is_refused_as_malformed(
    make, client, spec, checkpoint
) -> None:  # type: ignore[no-untyped-def]
    from agentihooks_checkpoint.errors import MalformedDirective

    r, _, new, built = resumed(make, spec, checkpoint)
    record = json.loads(client.hget(r.keys.attempt_records, new))
    record["directive"]["recovery"] = "fresh"  # a fresh directive that still names a checkpoint
    client.hset(r.keys.attempt_records, new, json.dumps(record))
    with pytest.raises(MalformedDirective, match="malformed restore directive"):
        r.report_outcome(new, native(new, built))
