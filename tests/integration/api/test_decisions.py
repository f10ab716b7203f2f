"""``POST /v1/executions/{execution}/restore-decision`` against the live server: every credential path."""

from __future__ import annotations

import logging

import pytest
from agentihooks_operator.api import ApiState, SwarmRegistry
from agentihooks_operator.recovery import NO_CHECKPOINT, NOT_PENDING, Recovery
from testsupport.control_api import Secrets, live_api
from testsupport.recovery import dump_keys

from .conftest import MASTER_A, MASTER_B, World


def post(w: World, eid: str, token: str | None, choice: str = "resume", agent: str = MASTER_A, **kw):  # type: ignore[no-untyped-def]
    return w.call(
        "POST", f"/v1/executions/{eid}/restore-decision", token, json={"choice": choice, "agent": agent}, **kw
    )


def test_operator_resume_is_applied_and_answers_decision_checkpoint_replacement(world: World) -> None:
    eid = world.fail()
    built = world.checkpoint(eid)
    r = post(world, eid, world.tokens["operator"])
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "accepted" and body["decision"] == "resume"
    assert body["checkpoint"] == built.checkpoint_id
    assert body["replacement"] in world.launcher.pods
    assert body["directive"]["recovery"] == "native" and body["directive"]["session_id"] == "sess-1"
    assert body["decided_by"] == "operator" and body["replayed"] is False


def test_repeating_the_accepted_choice_returns_the_same_decision_and_admits_nothing(world: World) -> None:
    eid = world.fail()
    world.checkpoint(eid)
    first = post(world, eid, world.tokens["operator"]).json()
    again = post(world, eid, world.tokens["operator"])
    assert again.status_code == 200
    assert {k: again.json()[k] for k in ("decision", "checkpoint", "replacement")} == {
        k: first[k] for k in ("decision", "checkpoint", "replacement")
    }
    assert again.json()["replayed"] is True
    assert world.launcher.created[first["replacement"]] == 1
    assert sum(world.launcher.created.values()) == 3  # the two first attempts and one replacement


def test_conflicting_choice_is_refused_and_changes_nothing(world: World) -> None:
    eid = world.fail()
    world.checkpoint(eid)
    post(world, eid, world.tokens["operator"])
    before = dump_keys(world.client)
    r = post(world, eid, world.tokens["operator"], choice="fresh")
    assert r.status_code == 409
    assert r.json()["message"] == NOT_PENDING
    after = dump_keys(world.client)
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert all(b"recovery-metrics" in k or b"recovery-events" in k for k in changed), changed


def test_resume_without_checkpoint_is_refused_with_the_exact_message(world: World) -> None:
    eid = world.fail()
    r = post(world, eid, world.tokens["operator"])
    assert r.status_code == 409
    assert r.json() == {"error": "no_checkpoint", "message": NO_CHECKPOINT}
    assert world.recoveries["swarm-a"].awaiting_execution("eng-1") == eid


def test_master_of_the_swarm_bound_to_the_named_agent_may_choose(world: World) -> None:
    eid = world.fail()
    r = post(world, eid, world.tokens[MASTER_A], choice="fresh", agent=MASTER_A)
    assert r.status_code == 200, r.text
    assert r.json()["decision"] == "fresh" and r.json()["decided_by"] == MASTER_A
    assert r.json()["checkpoint"] is None and r.json()["replacement"]


@pytest.mark.parametrize(
    ("who", "agent"),
    [
        (MASTER_A, MASTER_B),  # the right swarm's master naming another agent
        (MASTER_A, "master@display-name"),  # a display name is never trusted
        (MASTER_B, MASTER_B),  # a master of another swarm
        (MASTER_B, MASTER_A),
        ("unknown", MASTER_A),  # a well-formed token nobody holds: not authenticated at all (401)
    ],
)
def test_other_callers_get_forbidden_scope_and_nothing_changes(world: World, who: str, agent: str) -> None:
    eid = world.fail()
    token = world.tokens.get(who, "not-a-registered-token")
    before = dump_keys(world.client)
    r = post(world, eid, token, choice="fresh", agent=agent)
    assert r.status_code == (401 if who == "unknown" else 403)
    assert r.json()["error"] == "forbidden_scope"
    assert dump_keys(world.client) == before


def test_worker_credentials_cannot_decide(world: World) -> None:
    eid = world.fail()
    fenced_token = world.worker_token(eid) if eid in world.launcher.pods else None
    live_worker = world.worker_token(world.first["swarm-b"].execution_id)
    for token in filter(None, [fenced_token, live_worker]):
        r = post(world, eid, token, choice="fresh")
        assert r.status_code == 403 and r.json()["error"] == "forbidden_scope"
    assert world.recoveries["swarm-a"].awaiting_execution("eng-1") == eid


def test_fenced_worker_credential_is_refused(world: World) -> None:
    plan = world.first["swarm-a"]
    token = plan.worker_token.get_secret_value()
    eid = world.fail()
    r = post(world, eid, token, choice="fresh")
    assert r.status_code == 401 and r.json()["error"] == "forbidden_scope"  # revoked by the fence


@pytest.mark.parametrize(
    "header",
    [
        "Bearer",
        "Basic dXNlcjpwYXNz",
        "Bearer two tokens",
        "bearer tok\u00e9n",
        "Token abc",
        "Bearer " + "a" * 5000,
    ],
    ids=["no-token", "basic", "two-parts", "non-ascii", "other-scheme", "oversized"],
)
def test_malformed_authorization_is_401_without_echoing_it(world: World, header: str) -> None:
    eid = world.fail()
    with world.http() as c:
        r = c.post(
            f"/v1/executions/{eid}/restore-decision",
            json={"choice": "fresh", "agent": MASTER_A},
            headers={"Authorization": header.encode("utf-8")},  # type: ignore[dict-item]
        )
    assert r.status_code == 401
    assert r.json()["error"] == "malformed_credential"
    assert "dXNlcjpwYXNz" not in r.text and "two tokens" not in r.text


def test_no_credential_is_401(world: World) -> None:
    eid = world.fail()
    r = post(world, eid, None)
    assert r.status_code == 401 and r.json()["error"] == "missing_credential"
    assert r.headers["WWW-Authenticate"].startswith("Bearer")


def test_operator_gets_clear_errors_for_unknown_or_invalid_executions(world: World) -> None:
    op = world.tokens["operator"]
    assert post(world, "exe-" + "0" * 32, op).json()["error"] == "unknown_execution"
    assert post(world, "not-an-id", op).status_code == 400
    r = world.call(
        "POST", "/v1/executions/exe-" + "0" * 32 + "/restore-decision", op, json={"choice": "later"}
    )
    assert r.status_code == 400 and "choice" in r.json()["message"] and "agent" in r.json()["message"]
    r = world.call("POST", "/v1/executions/exe-" + "0" * 32 + "/restore-decision", op, content=b"{not json")
    assert r.status_code == 400 and r.json()["error"] == "invalid_json"


def test_a_master_cannot_probe_which_executions_exist(world: World) -> None:
    r = post(world, "exe-" + "0" * 32, world.tokens[MASTER_A])
    assert r.status_code == 403 and r.json()["error"] == "forbidden_scope"


def test_replica_without_the_lease_records_the_request_for_the_leaders_next_pass(world: World) -> None:
    eid = world.fail()
    leader = world.recoveries["swarm-a"]
    other = Recovery(
        world.client,
        "swarm-a",
        holder="ctl-b",
        catalog=world.store,
        launcher=world.launcher,
        namespace="default",
    )
    registry = SwarmRegistry(Secrets({"master-a": world.tokens[MASTER_A]}))
    registry.publish("swarm-a", other, world.specs["swarm-a"], holder="ctl-b")
    state = ApiState(registry=registry, redis=world.client, operator_hash=world.state.operator_hash)
    with live_api(state) as replica, world.http(world.tokens[MASTER_A]) as c:
        r = c.post(
            f"{replica.url}/v1/executions/{eid}/restore-decision",
            json={"choice": "fresh", "agent": MASTER_A},
        )
    assert r.status_code == 202, r.text
    assert r.json()["status"] == "recorded" and r.json()["choice"] == "fresh"
    assert leader.awaiting_execution("eng-1") == eid  # nothing applied by the replica
    report = leader.reconcile(world.specs["swarm-a"], [])
    assert [d.execution_id for d in report.decisions] == [eid]
    assert report.decisions[0].mode == "fresh" and report.decisions[0].decided_by == MASTER_A


def test_no_token_appears_in_logs_or_answers(world: World, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    eid = world.fail()
    world.checkpoint(eid)
    answers = [
        post(world, eid, world.tokens[MASTER_B]).text,
        post(world, eid, world.tokens[MASTER_A], agent=MASTER_B).text,
        post(world, eid, world.tokens["operator"], choice="fresh").text,
        post(world, eid, world.tokens["operator"], choice="resume").text,
    ]
    text = caplog.text + "".join(answers)
    for token in world.tokens.values():
        assert token not in text
