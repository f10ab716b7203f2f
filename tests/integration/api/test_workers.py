"""Worker routes: the restore outcome and the session/watermark heartbeats, own live credential only."""

from __future__ import annotations

import json

import pytest
from agentihooks_checkpoint.directive import RestoreOutcome
from agentihooks_checkpoint.stores.remote import ControlRefused, ControlReporter

from .conftest import MASTER_A, World


def replaced(w: World) -> tuple[str, str, dict]:  # type: ignore[type-arg]
    """Fail eng-1, resume it natively; returns (fenced id, replacement id, directive)."""
    eid = w.fail()
    w.checkpoint(eid)
    d = w.recoveries["swarm-a"].decide(eid, "resume", "operator", spec=w.specs["swarm-a"])
    assert d.replacement and d.directive
    return eid, d.replacement, d.directive.model_dump(mode="json")


def outcome_body(replacement: str, directive: dict) -> dict:  # type: ignore[type-arg]
    return {"execution_id": replacement, **directive}


def test_replacement_reports_its_outcome_once_and_repeats_are_idempotent(world: World) -> None:
    _, new, directive = replaced(world)
    token = world.worker_token(new)
    r = world.call("POST", f"/v1/executions/{new}/outcome", token, json=outcome_body(new, directive))
    assert r.status_code == 200, r.text
    stored = r.json()
    assert stored["status"] == "verified" and stored["recovery"] == "native"
    assert stored["archive_watermark"] == 5
    again = world.call("POST", f"/v1/executions/{new}/outcome", token, json=outcome_body(new, directive))
    assert again.status_code == 200 and again.json() == stored
    other = {**outcome_body(new, directive), "watermark": directive["watermark"] + 1}
    conflict = world.call("POST", f"/v1/executions/{new}/outcome", token, json=other)
    assert conflict.status_code == 409
    assert world.recoveries["swarm-a"].restore_outcomes_by_type["native"] == 1


def test_outcome_that_does_not_match_the_directive_is_refused(world: World) -> None:
    _, new, _directive = replaced(world)
    weaker = {"execution_id": new, "recovery": "fresh"}
    r = world.call("POST", f"/v1/executions/{new}/outcome", world.worker_token(new), json=weaker)
    assert r.status_code == 409 and "directive" in r.json()["message"]
    assert world.client.hget(world.recoveries["swarm-a"].keys.restore_outcomes, new) is None


def test_outcome_only_from_the_replacements_own_credential(world: World) -> None:
    _, new, directive = replaced(world)
    body = outcome_body(new, directive)
    others = [
        (world.worker_token(world.first["swarm-b"].execution_id), 403),  # a live worker of another swarm
        (world.tokens["operator"], 403),
        (world.tokens[MASTER_A], 403),
        # the fenced attempt's own credential: revoked, so no longer known at all
        (world.first["swarm-a"].worker_token.get_secret_value(), 401),
    ]
    for token, status in others:
        r = world.call("POST", f"/v1/executions/{new}/outcome", token, json=body)
        assert r.status_code == status and r.json()["error"] == "forbidden_scope"
    assert world.client.hget(world.recoveries["swarm-a"].keys.restore_outcomes, new) is None


def test_heartbeats_are_recorded_for_the_current_attempt(world: World) -> None:
    plan = world.first["swarm-b"]
    token = plan.worker_token.get_secret_value()
    eid = plan.execution_id
    assert (
        world.call("POST", f"/v1/executions/{eid}/session", token, json={"session_id": "sess-9"}).status_code
        == 200
    )
    assert (
        world.call("POST", f"/v1/executions/{eid}/watermark", token, json={"watermark": 77}).status_code
        == 200
    )
    beat = json.loads(world.client.hget(world.recoveries["swarm-b"].keys.heartbeats, eid))
    assert beat["session_id"] == "sess-9" and beat["archive_watermark"] == 77
    bad = world.call("POST", f"/v1/executions/{eid}/watermark", token, json={"watermark": -1})
    assert bad.status_code == 400 and "watermark" in bad.json()["message"]


def test_fenced_attempt_heartbeats_are_refused_at_once(world: World) -> None:
    token = world.first["swarm-a"].worker_token.get_secret_value()
    eid = world.fail()
    before = world.client.hget(world.recoveries["swarm-a"].keys.heartbeats, eid)
    r = world.call("POST", f"/v1/executions/{eid}/watermark", token, json={"watermark": 99})
    assert r.status_code == 410 and r.json()["error"] == "fenced"  # revoked by the fence: stop the agent
    assert world.client.hget(world.recoveries["swarm-a"].keys.heartbeats, eid) == before


def test_control_reporter_speaks_the_routes(world: World) -> None:
    _, new, directive = replaced(world)
    reporter = ControlReporter(world.url, new, world.worker_token(new))
    reporter.report_progress(new, "sess-1", 7)
    reporter.report_outcome(RestoreOutcome.model_validate(outcome_body(new, directive)))
    assert world.recoveries["swarm-a"].restore_outcomes_by_type["native"] == 1
    wrong = ControlReporter(world.url, new, "not-the-credential")
    with pytest.raises(ControlRefused) as e:
        wrong.report_progress(new, None, 8)
    assert e.value.status == 401 and "not-the-credential" not in str(e.value)


def test_reports_to_a_replica_without_the_lease_answer_503_and_change_nothing(world: World) -> None:
    from agentihooks_operator.api import ApiState, SwarmRegistry
    from agentihooks_operator.recovery import Recovery
    from testsupport.control_api import Secrets, live_api

    plan = world.first["swarm-b"]
    token = plan.worker_token.get_secret_value()
    other = Recovery(
        world.client,
        "swarm-b",
        holder="ctl-b",
        catalog=world.store,
        launcher=world.launcher,
        namespace="default",
    )
    registry = SwarmRegistry(Secrets())
    registry.publish("swarm-b", other, world.specs["swarm-b"], holder="ctl-b")
    before = world.client.hget(world.recoveries["swarm-b"].keys.heartbeats, plan.execution_id)
    with live_api(ApiState(registry=registry, redis=world.client)) as replica:
        r = world.call(
            "POST",
            f"{replica.url}/v1/executions/{plan.execution_id}/watermark",
            token,
            json={"watermark": 50},
        )
        assert r.status_code == 503 and r.json()["error"] == "not_leader"
        assert r.headers["Retry-After"] == "2"
        reporter = ControlReporter(replica.url, plan.execution_id, token, retries=0)
        with pytest.raises(ControlRefused) as e:
            reporter.report_progress(plan.execution_id, None, 51)
        assert e.value.status == 503
    assert world.client.hget(world.recoveries["swarm-b"].keys.heartbeats, plan.execution_id) == before
