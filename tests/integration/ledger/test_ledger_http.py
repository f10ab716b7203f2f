"""The ledger's HTTP surface without a browser: the data route's access rules and rows, headers, assets."""

from __future__ import annotations

import json

from agentihooks_operator.ledger import CSP

from .conftest import HOSTILE, MASTER_A, MASTER_B, World

DATA = "/v1/swarms/swarm-a/ledger"


def test_data_route_is_for_the_operator_and_the_swarms_masters(world: World) -> None:
    assert world.call("GET", DATA).status_code == 401
    other = world.call("GET", DATA, world.tokens[MASTER_B])
    assert other.status_code == 403 and other.json()["error"] == "forbidden_scope"
    worker = world.call("GET", DATA, world.first["swarm-a"][0].worker_token.get_secret_value())
    assert worker.status_code == 403
    unknown = world.call("GET", "/v1/swarms/nope/ledger", world.tokens["operator"])
    assert unknown.status_code == 404 and unknown.json()["error"] == "unknown_swarm"
    malformed = world.call("GET", DATA, headers={"Authorization": "Basic abc"})
    assert malformed.status_code == 401 and malformed.json()["error"] == "malformed_credential"
    for answer in (other, unknown, malformed):
        assert answer.headers["Content-Security-Policy"] == CSP


def test_rows_and_cards_follow_a_failure(world: World) -> None:
    before = world.call("GET", DATA, world.tokens[MASTER_A])
    assert before.status_code == 200, before.text
    body = before.json()
    assert body["caller"] == {"kind": "master", "agent": MASTER_A}
    assert body["paused"] is False and body["cards"] == []
    rows = {r["seat"]: r for r in body["rows"]}
    assert rows["eng-1"]["text"] == "Write the release notes for 2.1" and rows["eng-2"]["text"] == HOSTILE
    assert rows["eng-1"]["generation"] == 1 and rows["eng-1"]["recovery_pending"] is False

    (lost,) = world.fail("eng-1")
    built = world.checkpoint(lost)
    body = world.call("GET", DATA, world.tokens["operator"]).json()
    assert body["caller"] == {"kind": "operator", "agent": None} and body["paused"] is True
    rows = {r["seat"]: r for r in body["rows"]}
    assert rows["eng-1"]["awaiting"] == "recovery_pending" and rows["eng-1"]["recovery_pending"] is True
    assert rows["eng-2"]["recovery_pending"] is False
    (card,) = body["cards"]
    assert card["execution_id"] == lost and card["awaiting_decision"] is True
    assert card["resume_label"] == "Resume native" and card["checkpoint"] == built.checkpoint_id
    assert (
        card["reason"] == f"oom_killed; native resume from {built.checkpoint_id} at record {built.watermark}"
    )

    d = world.recoveries["swarm-a"].decide(lost, "resume", "operator", spec=world.specs["swarm-a"])
    assert d.replacement
    body = world.call("GET", DATA, world.tokens["operator"]).json()
    rows = {r["seat"]: r for r in body["rows"]}
    assert rows["eng-1"]["generation"] == 2 and rows["eng-1"]["execution_id"] == d.replacement
    assert rows["eng-1"]["recovery_pending"] is True
    assert body["cards"][0]["awaiting_decision"] is False and body["cards"][0]["continuity"] == "pending"
    assert world.report(d.replacement).status_code == 200
    body = world.call("GET", DATA, world.tokens["operator"]).json()
    assert body["cards"][0]["continuity"] == "native"
    assert {r["seat"]: r for r in body["rows"]}["eng-1"]["recovery_pending"] is False


def test_page_is_a_shell_with_strict_headers_and_no_inline_code(world: World) -> None:
    r = world.call("GET", "/ledger/swarm-a")
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/html")
    assert r.headers["Content-Security-Policy"] == CSP
    for directive in (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "object-src 'none'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    ):
        assert directive in r.headers["Content-Security-Policy"]
    assert r.headers["X-Content-Type-Options"] == "nosniff" and r.headers["Cache-Control"] == "no-store"
    assert 'data-swarm="swarm-a"' in r.text and "Write the release notes" not in r.text
    # A page for a swarm that is not registered is the same empty shell (it reveals nothing).
    assert world.call("GET", "/ledger/not-registered").status_code == 200


def test_a_name_that_cannot_be_a_swarm_is_refused_before_it_is_echoed(world: World) -> None:
    for bad in ("%3Cscript%3Ealert(1)%3C%2Fscript%3E", "-dash-first", "a" * 129):
        r = world.call("GET", f"/ledger/{bad}")
        assert r.status_code == 400, bad
        assert r.json()["error"] == "invalid_swarm"
        assert "<script>" not in r.text
        assert r.headers["Content-Security-Policy"] == CSP


def test_only_the_shipped_assets_are_served(world: World) -> None:
    js = world.call("GET", "/ledger/static/ledger.js")
    assert js.status_code == 200 and js.headers["Content-Type"].startswith("text/javascript")
    css = world.call("GET", "/ledger/static/ledger.css")
    assert css.status_code == 200 and css.headers["Content-Type"].startswith("text/css")
    for name in ("nope.js", "..%2F__init__.py", "%2E%2E%2Fpage.py", "ledger.js.map"):
        r = world.call("GET", f"/ledger/static/{name}")
        assert r.status_code == 404, name
        assert r.headers["Content-Security-Policy"] == CSP
    # A dot-dot path is normalised by the client to /ledger/page.py: the empty shell, never a source file.
    dotted = world.call("GET", "/ledger/static/../page.py")
    assert 'data-swarm="page.py"' in dotted.text and "import" not in dotted.text


def test_other_control_api_routes_keep_their_own_headers(world: World) -> None:
    r = world.call("GET", "/v1/swarms/swarm-a/status", world.tokens["operator"])
    assert r.status_code == 200 and "Content-Security-Policy" not in r.headers
    assert json.loads(r.text)["swarm"] == "swarm-a"
