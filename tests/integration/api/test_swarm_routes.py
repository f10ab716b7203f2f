"""Status, pause/unpause, a seat's checkpoints, events (JSON and SSE), metrics, health and readiness."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import redis
from agentihooks_operator.api import ApiState, SwarmRegistry
from testsupport.control_api import live_api

from .conftest import MASTER_A, MASTER_B, World


def test_status_lists_handoff_cards_with_the_spec_fields(world: World) -> None:
    eid = world.fail()
    built = world.checkpoint(eid)
    r = world.call("GET", "/v1/swarms/swarm-a/status", world.tokens[MASTER_A])
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["paused"] is True and body["lease_held"] is True
    card = body["handoffs"][0]
    for field in (
        "seat",
        "at",
        "reason",
        "continuity",
        "binding",
        "bound_at",
        "successor",
        "awaiting",
        "checkpoint",
        "resume_available",
        "resume_label",
    ):
        assert field in card
    assert card["seat"] == "eng-1" and card["binding"] == "awaiting decision"
    assert card["checkpoint"] == built.checkpoint_id and card["resume_available"] is True
    assert card["resume_label"] == "Resume native" and card["continuity"] == "pending"
    assert (
        card["reason"] == f"oom_killed; native resume from {built.checkpoint_id} at record {built.watermark}"
    )


def test_status_is_for_the_operator_and_the_swarms_masters_only(world: World) -> None:
    assert world.call("GET", "/v1/swarms/swarm-a/status", world.tokens["operator"]).status_code == 200
    assert world.call("GET", "/v1/swarms/swarm-a/status", world.tokens[MASTER_B]).status_code == 403
    assert world.call("GET", "/v1/swarms/swarm-a/status").status_code == 401
    r = world.call("GET", "/v1/swarms/nope/status", world.tokens["operator"])
    assert r.status_code == 404 and r.json()["error"] == "unknown_swarm"


def test_pause_and_unpause_are_operator_only_and_survive_in_redis(world: World) -> None:
    keys = world.recoveries["swarm-b"].keys
    r = world.call("POST", "/v1/swarms/swarm-b/pause", world.tokens[MASTER_B])
    assert r.status_code == 403 and not world.client.exists(keys.recovery_paused)
    r = world.call("POST", "/v1/swarms/swarm-b/pause", world.tokens["operator"])
    assert r.json() == {"swarm": "swarm-b", "paused": True} and world.client.exists(keys.recovery_paused)
    r = world.call("POST", "/v1/swarms/swarm-b/unpause", world.tokens["operator"])
    assert r.json() == {"swarm": "swarm-b", "paused": False} and not world.client.exists(keys.recovery_paused)


def test_seat_checkpoints_and_restore_request(world: World) -> None:
    eid = world.fail()
    built = world.checkpoint(eid)
    r = world.call("GET", "/v1/swarms/swarm-a/seats/eng-1/checkpoints", world.tokens[MASTER_A])
    assert r.status_code == 200
    assert r.json()["newest_compatible"] == built.checkpoint_id
    assert (
        world.call("GET", "/v1/swarms/swarm-a/seats/eng-9/checkpoints", world.tokens[MASTER_A]).status_code
        == 404
    )
    req = world.call(
        "POST",
        "/v1/swarms/swarm-a/seats/eng-1/restore-request",
        world.tokens[MASTER_A],
        json={"choice": "resume"},
    )
    assert req.status_code == 202 and req.json()["status"] == "recorded"
    assert "next recovery pass" in req.json()["message"]
    report = world.recoveries["swarm-a"].reconcile(world.specs["swarm-a"], [])
    assert report.decisions[0].mode == "resume" and report.decisions[0].decided_by == MASTER_A
    same = world.call(
        "POST",
        "/v1/swarms/swarm-a/seats/eng-1/restore-request",
        world.tokens[MASTER_A],
        json={"choice": "resume"},
    )
    assert same.status_code == 200 and same.json()["replacement"] == report.decisions[0].replacement
    other = world.call(
        "POST",
        "/v1/swarms/swarm-a/seats/eng-1/restore-request",
        world.tokens[MASTER_A],
        json={"choice": "fresh"},
    )
    assert other.status_code == 409
    naming = world.call(
        "POST",
        "/v1/swarms/swarm-a/seats/eng-1/restore-request",
        world.tokens[MASTER_A],
        json={"choice": "fresh", "agent": MASTER_B},
    )
    assert naming.status_code == 403


def _streamed(world: World, want: int, headers: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The first ``want`` events of swarm-a's followed stream (an SSE answer), as the operator."""
    auth = {"Authorization": f"Bearer {world.tokens['operator']}"}
    with (
        httpx.Client(base_url=world.url, timeout=30) as c,
        c.stream(
            "GET", "/v1/swarms/swarm-a/events", params={"follow": "true"}, headers={**auth, **(headers or {})}
        ) as stream,
    ):
        assert stream.headers["content-type"].startswith("text/event-stream")
        seen: list[dict[str, Any]] = []
        for line in stream.iter_lines():
            if line.startswith("data: "):
                seen.append(json.loads(line[6:]))
            if len(seen) == want:
                break
    return seen


def test_events_json_and_follow_stream(world: World) -> None:
    world.fail()
    r = world.call("GET", "/v1/swarms/swarm-a/events", world.tokens["operator"], params={"count": 10})
    events = r.json()["events"]
    assert any(e["type"] == "fence" for e in events)
    seen = _streamed(world, len(events))
    assert [e["id"] for e in seen] == [e["id"] for e in events]
    assert (
        world.call(
            "GET", "/v1/swarms/swarm-a/events", world.tokens["operator"], params={"count": "x"}
        ).status_code
        == 400
    )


def test_a_stream_resumed_with_last_event_id_starts_after_it(world: World) -> None:
    world.fail()
    world.fail("swarm-b")  # another swarm's events are not this stream's
    world.recoveries["swarm-a"].decide(world.first["swarm-a"].execution_id, "fresh", "operator")
    events = world.call("GET", "/v1/swarms/swarm-a/events", world.tokens["operator"]).json()["events"]
    assert len(events) >= 2, events
    auth = {"Authorization": f"Bearer {world.tokens['operator']}"}
    ids = [e["id"] for e in _streamed(world, len(events) - 1, {"Last-Event-ID": events[0]["id"]})]
    assert ids == [e["id"] for e in events[1:]]  # not the one the client already has
    with httpx.Client(base_url=world.url, timeout=30) as c:
        bad = c.get(
            "/v1/swarms/swarm-a/events",
            params={"follow": "true"},
            headers={**auth, "Last-Event-ID": "../../etc"},
        )
    assert bad.status_code == 400 and "Last-Event-ID" in bad.json()["message"]


def test_metrics_exposes_every_family(world: World) -> None:
    eid = world.fail()
    world.checkpoint(eid)
    world.recoveries["swarm-a"].decide(eid, "resume", MASTER_A, spec=world.specs["swarm-a"])
    text = world.call("GET", "/metrics").text
    assert 'agentihooks_fences_total{namespace="default",reason="oom_killed",swarm="swarm-a"} 1.0' in text
    assert (
        'agentihooks_decisions_by_choice_total{choice="resume",namespace="default",swarm="swarm-a"} 1.0'
        in text
    )
    assert (
        'agentihooks_decisions_by_decider_total{decider="master",namespace="default",swarm="swarm-a"} 1.0'
        in text
    )
    assert (
        'agentihooks_restore_outcomes_by_type{namespace="default",swarm="swarm-a",type="native"} 0.0' in text
    )
    assert 'agentihooks_restore_outcomes_total{namespace="default",swarm="swarm-a",type="native"} 0.0' in text
    assert 'agentihooks_lease_held{namespace="default",swarm="swarm-a"} 1.0' in text
    assert 'agentihooks_seats_awaiting_decision{namespace="default",swarm="swarm-a"} 0.0' in text
    assert "# TYPE agentihooks_refusals_total counter" in text
    for token in world.tokens.values():
        assert token not in text


def test_health_and_readiness_follow_kopf_and_redis(world: World) -> None:
    assert world.call("GET", "/healthz").status_code == 200
    assert world.call("GET", "/readyz").json() == {"status": "ready", "kopf": True, "redis": True}
    dead = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.5)
    stopping = {"flag": True}
    state = ApiState(registry=SwarmRegistry(), redis=dead, kopf_ready=lambda: not stopping["flag"])
    with live_api(state) as server, httpx.Client(base_url=server.url) as c:
        assert c.get("/healthz").status_code == 503
        r = c.get("/readyz")
        assert r.status_code == 503 and r.json()["redis"] is False
        stopping["flag"] = False
        assert c.get("/healthz").status_code == 200
        assert c.get("/readyz").status_code == 503


def test_openapi_document_is_served_and_unknown_routes_answer_json(world: World) -> None:
    doc = world.call("GET", "/v1/openapi.json").json()
    assert "/v1/executions/{execution}/restore-decision" in doc["paths"]
    # the committed docs/openapi.json is exactly what a live operator serves
    committed = Path(__file__).resolve().parents[3] / "docs" / "openapi.json"
    assert doc == json.loads(committed.read_text()), "docs/openapi.json is stale: run scripts/gen-openapi.py"
    r = world.call("GET", "/v1/nothing-here")
    assert r.status_code == 404 and r.json()["error"] == "not_found"
    r = world.call("DELETE", "/v1/swarms/swarm-a/status")
    assert r.status_code == 405


def test_a_name_held_in_two_namespaces_is_refused_naming_both_and_changes_nothing(world: World) -> None:
    keys = world.recoveries["swarm-b"].keys
    world.registry.publish(
        "swarm-b", world.recoveries["swarm-b"], world.specs["swarm-b"], holder="ctl-a", namespace="team-b"
    )
    r = world.call("POST", "/v1/swarms/swarm-b/pause", world.tokens["operator"])
    assert r.status_code == 409 and r.json()["error"] == "ambiguous_swarm", r.text
    assert "default, team-b" in r.json()["message"]
    assert not world.client.exists(keys.recovery_paused)
    r = world.call("GET", "/v1/swarms/swarm-b/status", world.tokens["operator"])
    assert r.status_code == 409 and r.json()["error"] == "ambiguous_swarm", r.text
    world.registry.withdraw("swarm-b", "team-b")
    assert world.call("GET", "/v1/swarms/swarm-b/status", world.tokens["operator"]).status_code == 200
