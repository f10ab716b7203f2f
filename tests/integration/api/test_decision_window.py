"""A card offers a choice only once the decision record exists, so a choice it offers is never refused early.

Between the fence and the decision record (the release steps run first) the
card's binding is ``recovering``: no controls, and the CLI does not post. The
window is made wide on purpose: the controller crashes just before it writes
the decision record, and a restarted controller finishes the steps.
"""

from __future__ import annotations

from .conftest import World


def card(world: World, token: str) -> dict:  # type: ignore[type-arg]
    r = world.call("GET", "/v1/swarms/swarm-a/status", token)
    assert r.status_code == 200, r.text
    (only,) = r.json()["handoffs"]
    return dict(only)


def post(world: World, eid: str, token: str, choice: str = "fresh"):  # type: ignore[no-untyped-def]
    body = {"choice": choice, "agent": "operator"}
    return world.call("POST", f"/v1/executions/{eid}/restore-decision", token, json=body)


def test_card_reads_recovering_until_the_decision_record_exists(world: World) -> None:
    recovery, eid = world.fail_before_decide()
    op = world.tokens["operator"]
    before = card(world, op)
    assert before["execution_id"] == eid
    assert before["binding"] == "recovering"
    assert before["resume_available"] is False and before["resume_label"] is None
    assert before["checkpoint"] is None
    # the core agrees: there is nothing to decide yet, exactly as the card says
    assert post(world, eid, op).status_code == 409
    assert recovery.awaiting_execution("eng-1") is None

    recovery.reconcile(world.specs["swarm-a"], [])  # the restarted pass writes the decision record
    after = card(world, op)
    assert after["binding"] == "awaiting decision"
    answer = post(world, eid, op)
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "accepted" and answer.json()["decision"] == "fresh"
    assert card(world, op)["binding"] == "bound"


def test_every_card_offering_a_choice_accepts_it(world: World) -> None:
    """However the pass was interrupted, a card that says ``awaiting decision`` never answers not_pending."""
    recovery, eid = world.fail_before_decide()
    op = world.tokens["operator"]
    for _ in range(2):
        shown = card(world, op)
        if shown["binding"] == "awaiting decision":
            assert post(world, eid, op).status_code == 200
            break
        assert shown["binding"] == "recovering"
        recovery.reconcile(world.specs["swarm-a"], [])
    assert card(world, op)["binding"] == "bound"


def test_ledger_page_data_marks_a_recovering_card_without_a_choice(world: World) -> None:
    world.fail_before_decide()
    r = world.call("GET", "/v1/swarms/swarm-a/ledger", world.tokens["operator"])
    assert r.status_code == 200, r.text
    (shown,) = r.json()["cards"]
    assert shown["recovering"] is True and shown["awaiting_decision"] is False
