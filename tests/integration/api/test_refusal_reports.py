"""A replacement's refusal report, over HTTP, with every reason of the spec's refusal table.

The spec's table writes two reasons as sentences: ``source: <what could not be applied>`` and ``no
checkpoint store is configured for this worker``. The worker reports those words (its
``restore_refused`` line's ``reason``), and the route once refused them (400 ``invalid_body``: it took
only lower-case tokens), so the next pass fenced the refusing worker as an ordinary exit and the
accepted decision no longer waited for a relaunch (issue 47). Each reason is now accepted as written,
the seat's card shows the refusal and waits, and a relaunch launches the next generation once.
Malformed reasons are still refused, naming the field. After a fresh relaunch rewrote the accepted
``resume``, the master repeating ``resume`` is answered the decision as it stands (the spec: a
repeated accepted choice returns the same decision), and nothing new is admitted.
"""

from __future__ import annotations

import pytest
from agentihooks_checkpoint.reasons import NO_STORE_MESSAGE

from .conftest import World

TOKENS = [
    "manifest_absent",
    "corrupt_manifest",
    "missing_object",
    "corrupt_object",
    "unsupported_version",
    "invalid_record",
    "not_committed",
    "missing_material",
    "missing_watermark",
    "inventory_mismatch",
    "scope_mismatch",
    "identity_mismatch",
    "context_only",
    "conversation_mismatch",
    "unqualified_version",
    "version_changed",
]
SENTENCES = ["source: the captured patch does not apply to the worktree", NO_STORE_MESSAGE]
RELAUNCH = "/v1/swarms/swarm-a/seats/eng-1/relaunch"


def refusing_replacement(world: World) -> tuple[str, str]:
    """eng-1 of swarm-a failed and was resumed; returns (the fenced attempt, its replacement)."""
    lost = world.fail()
    world.checkpoint(lost)
    decided = world.recoveries["swarm-a"].decide(lost, "resume", "operator", spec=world.specs["swarm-a"])
    assert decided.replacement is not None
    return lost, decided.replacement


def report(world: World, execution: str, reason: str, message: str | None = None) -> object:
    body = {"execution_id": execution, "reason": reason, "message": message or reason}
    return world.call(
        "POST", f"/v1/executions/{execution}/restore-refusal", world.worker_token(execution), json=body
    )


def card(world: World) -> dict[str, object]:
    status = world.call("GET", "/v1/swarms/swarm-a/status", world.tokens["operator"])
    assert status.status_code == 200, status.text
    [seat] = [c for c in status.json()["handoffs"] if c["seat"] == "eng-1"]
    return dict(seat)


@pytest.mark.parametrize("reason", TOKENS + SENTENCES)
def test_each_reason_of_the_table_is_accepted_and_the_decision_waits_for_a_relaunch(
    world: World, reason: str
) -> None:
    _lost, refused = refusing_replacement(world)
    answer = report(world, refused, reason)
    assert answer.status_code == 200, answer.text  # type: ignore[attr-defined]
    assert answer.json()["reason"] == reason  # type: ignore[attr-defined]
    shown = card(world)["restore_refused"]
    assert isinstance(shown, dict) and shown["reason"] == reason and shown["execution_id"] == refused
    created = sum(world.launcher.created.values())
    relaunched = world.call("POST", RELAUNCH, world.tokens["operator"], json={})
    assert relaunched.status_code == 200, relaunched.text
    assert relaunched.json()["refused"] == refused
    assert sum(world.launcher.created.values()) == created + 1  # the next generation, once


@pytest.mark.parametrize(
    "reason",
    [
        "Version_Changed",
        "source:",
        "source: ",
        "source: bell\x07",
        "source: " + "x" * 300,
        "no checkpoint store is configured",
        "",
    ],
)
def test_a_malformed_reason_is_refused_naming_the_field_and_changes_nothing(
    world: World, reason: str
) -> None:
    _lost, refused = refusing_replacement(world)
    answer = report(world, refused, reason, message="m")
    assert answer.status_code == 400, answer.text  # type: ignore[attr-defined]
    assert answer.json()["error"] == "invalid_body" and "reason" in answer.json()["message"]  # type: ignore[attr-defined]
    assert card(world).get("restore_refused") is None


def test_repeating_the_accepted_resume_after_a_fresh_relaunch_answers_the_decision(world: World) -> None:
    lost, refused = refusing_replacement(world)
    assert report(world, refused, "context_only").status_code == 200  # type: ignore[attr-defined]
    fresh = world.call("POST", RELAUNCH, world.tokens["operator"], json={"fresh": True})
    assert fresh.status_code == 200, fresh.text
    created = dict(world.launcher.created)
    body = {"choice": "resume", "agent": "operator"}
    again = world.call("POST", f"/v1/executions/{lost}/restore-decision", world.tokens["operator"], json=body)
    assert again.status_code == 200, again.text
    assert again.json()["replayed"] is True and again.json()["replacement"] == refused
    assert world.launcher.created == created  # nothing admitted
