"""Native resume only for the session the fenced attempt held.

The controller offers, or applies without asking, native resume only when the
checkpoint's native session is the session the fenced attempt recorded. A
native checkpoint of another session (the attempt started a new conversation
after the capture) would only be refused by the replacement as
``conversation_mismatch``; the card offers "Continue from context" for it and
a resume reconstructs. Real Redis, real checkpoints in a real local store.
"""

from __future__ import annotations

from agentihooks_operator.recovery import Recovery
from testsupport.recovery import observe


def fail(r: Recovery, spec, reported: str | None, checkpoint, *, paused: bool = False):  # type: ignore[no-untyped-def]
    """Seat eng-1 held ``reported``, has a native checkpoint of ``sess-1``, and is OOM-killed."""
    eid = r.ensure_seats(spec)[0].execution_id
    if reported is not None:
        r.report_session(eid, reported)
    r.report_watermark(eid, 5)
    built = checkpoint(eid, session_id="sess-1")
    if paused:
        r.pause()
    report = r.reconcile(spec, observe([(eid, "eng-1", 1)], failed={eid: "oom_killed"}))
    return eid, built, report


def test_the_attempts_own_session_is_resumed_natively_without_asking(
    make, spec, checkpoint, launcher
) -> None:  # type: ignore[no-untyped-def]
    r = make()
    _, built, report = fail(r, spec, "sess-1", checkpoint)
    [decision] = report.decisions
    assert decision.decided_by == "automation" and decision.mode == "resume"
    assert decision.directive is not None and decision.directive.recovery.value == "native"
    assert decision.directive.session_id == "sess-1"
    assert launcher.pods[decision.replacement].directive == decision.directive
    [card] = r.cards(spec)
    assert card.binding == "bound" and card.resume_label == "Resume native"
    assert card.reason == f"oom_killed; native resume from {built.checkpoint_id} at record {built.watermark}"


def test_the_attempts_own_session_is_offered_as_resume_native(make, spec, checkpoint) -> None:  # type: ignore[no-untyped-def]
    r = make()
    eid, _, report = fail(r, spec, "sess-1", checkpoint, paused=True)
    assert [d.mode for d in report.decisions] == ["recovery_pending"]
    [card] = r.cards(spec)
    assert card.binding == "awaiting decision" and card.resume_label == "Resume native"
    result = r.decide(eid, "resume", "operator", spec=spec)
    assert result.directive is not None and result.directive.recovery.value == "native"


def test_a_checkpoint_of_another_session_is_not_resumed_natively_without_asking(
    make, spec, checkpoint, launcher
) -> None:  # type: ignore[no-untyped-def]
    r = make()
    eid, built, report = fail(r, spec, "sess-2", checkpoint)  # automation on, not paused
    assert [d.mode for d in report.decisions] == ["recovery_pending"], "native resume of another session"
    assert report.launches == []
    assert not any(p.generation > 1 for p in launcher.pods.values())  # no replacement launched
    [card] = r.cards(spec)
    assert card.binding == "awaiting decision"
    assert card.resume_available and card.checkpoint == built.checkpoint_id
    assert card.resume_label == "Continue from context"
    assert (
        card.reason
        == f"oom_killed; continue from context from {built.checkpoint_id} at record {built.watermark}"
    )
    result = r.decide(eid, "resume", "operator", spec=spec)
    assert result.directive is not None
    assert result.directive.recovery.value == "reconstructed" and result.directive.session_id is None
    assert result.directive.checkpoint_id == built.checkpoint_id
    assert result.replacement is not None
    assert launcher.pods[result.replacement].directive == result.directive


def test_an_attempt_that_reported_no_session_is_offered_context_continuation(make, spec, checkpoint) -> None:  # type: ignore[no-untyped-def]
    r = make()
    _, _, report = fail(r, spec, None, checkpoint)
    assert [d.mode for d in report.decisions] == ["recovery_pending"]
    [card] = r.cards(spec)
    assert card.resume_label == "Continue from context"
