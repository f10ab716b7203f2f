"""A replacement that refuses its checkpoint as damaged: the seat is offered the newest one that verifies.

Real Redis, real checkpoints in a real local store, the in-memory launcher. The fenced attempt
captured two checkpoints; the automation resumed the newer; then one of that checkpoint's own
objects was damaged (after it verified), and the replacement refused it (``corrupt_object``). The
seat's card now offers the older checkpoint, and a relaunch resumes from it instead of launching the
same refused directive again. With no checkpoint left that verifies, the relaunch is refused
``no_checkpoint`` and ``--fresh`` remains. A refusal that is not about the checkpoint
(``version_changed``) still relaunches the same directive (tests/integration/recovery/test_relaunch.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from agentihooks_checkpoint.checks import check_content
from agentihooks_checkpoint.layout import object_key
from agentihooks_operator.recovery import RecoveryRefused
from testsupport.recovery import observe


def damage(store_root: Path, digest: str) -> None:
    [path] = [p for p in store_root.rglob("*") if p.is_file() and str(p).endswith(object_key(digest))]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def refused_on_damage(make, spec, checkpoint, launcher, store, *, two: bool = True):  # type: ignore[no-untyped-def]
    r = make()
    first = r.ensure_seats(spec)[0].execution_id
    r.report_session(first, "sess-1")
    r.report_watermark(first, 7)
    older = checkpoint(first, session_id="sess-1", records=6) if two else None
    newer = checkpoint(first, session_id="sess-1", records=8)
    report = r.reconcile(spec, observe([(first, "eng-1", 1)], failed={first: "oom_killed"}))
    [decision] = report.decisions
    assert decision.mode == "resume" and decision.checkpoint == newer.checkpoint_id
    shared = {i.digest for i in check_content(older.record)} if older else set()
    own = [i for i in check_content(newer.record) if i.digest not in shared]
    damage(store.root, own[0].digest)
    refused = decision.replacement
    r.report_refusal(refused, "corrupt_object", "an object of the checkpoint does not hash to its record")
    return r, first, refused, older, newer


def test_the_card_offers_the_older_checkpoint_and_a_relaunch_resumes_from_it(
    make, spec, checkpoint, launcher, store
) -> None:  # type: ignore[no-untyped-def]
    r, _, _, older, _ = refused_on_damage(make, spec, checkpoint, launcher, store)
    [card] = r.cards(spec)
    assert card.restore_refused is not None and card.restore_refused.reason == "corrupt_object"
    assert card.restore_refused.offered_checkpoint == older.checkpoint_id
    assert "offered_checkpoint" in card.restore_refused.hint

    result = r.relaunch("eng-1", "operator", spec=spec)
    assert result.directive is not None
    assert result.directive.checkpoint_id == older.checkpoint_id
    assert result.directive.recovery.value == "native"  # the same session, one checkpoint earlier
    assert result.directive.watermark == older.watermark
    plan = launcher.pods[result.replacement]
    assert plan.directive is not None and plan.directive.checkpoint_id == older.checkpoint_id
    again = r.relaunch("eng-1", "operator", spec=spec)  # asked again: the same relaunch
    assert again.replayed and again.replacement == result.replacement


def test_with_nothing_left_that_verifies_only_a_fresh_relaunch_goes(
    make, spec, checkpoint, launcher, store
) -> None:  # type: ignore[no-untyped-def]
    r, _, refused, _, _ = refused_on_damage(make, spec, checkpoint, launcher, store, two=False)
    [card] = r.cards(spec)
    assert card.restore_refused is not None and card.restore_refused.offered_checkpoint is None
    pods = set(launcher.pods)
    with pytest.raises(RecoveryRefused) as e:
        r.relaunch("eng-1", "operator", spec=spec)
    assert e.value.reason == "no_checkpoint"
    assert set(launcher.pods) == pods  # nothing launched, nothing changed
    assert r.current_execution("eng-1") == refused
    fresh = r.relaunch("eng-1", "operator", spec=spec, fresh=True)
    assert fresh.directive is not None and fresh.directive.recovery.value == "fresh"
