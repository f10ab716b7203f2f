"""``GET /v1/swarms``: the swarms a caller may see, authenticated before anything is read.

The operator sees every swarm this controller serves; a master only the swarms it is a registered
master of; a worker's credential (known, but no reader of swarms) gets 403. No token, a malformed
header or a token nobody holds gets 401 and nothing about which swarms exist. The route is in the
route table, so the OpenAPI document lists it.
"""

from __future__ import annotations

from agentihooks_operator.api.openapi import document

from .conftest import MASTER_A, MASTER_B, World

PATH = "/v1/swarms"


def listed(world: World, token: str) -> list[str]:
    r = world.call("GET", PATH, token)
    assert r.status_code == 200, r.text
    return [s["swarm"] for s in r.json()["swarms"]]


def test_the_operator_sees_every_swarm_with_its_seats(world: World) -> None:
    r = world.call("GET", PATH, world.tokens["operator"])
    assert r.status_code == 200, r.text
    body = r.json()
    assert [s["swarm"] for s in body["swarms"]] == ["swarm-a", "swarm-b"]
    for entry in body["swarms"]:
        assert entry["seats"] == [s.name for s in world.specs[entry["swarm"]].seats]


def test_a_master_sees_only_its_own_swarms(world: World) -> None:
    assert listed(world, world.tokens[MASTER_A]) == ["swarm-a"]
    assert listed(world, world.tokens[MASTER_B]) == ["swarm-b"]


def test_a_withdrawn_swarm_is_no_longer_listed(world: World) -> None:
    world.registry.withdraw("swarm-b")
    assert listed(world, world.tokens["operator"]) == ["swarm-a"]


def test_a_worker_credential_is_known_but_forbidden(world: World) -> None:
    worker = world.worker_token(world.first["swarm-a"].execution_id)
    r = world.call("GET", PATH, worker)
    assert r.status_code == 403
    assert r.json() == {"error": "forbidden_scope", "message": "forbidden_scope"}


def test_without_a_known_token_the_answer_is_401_before_anything_is_read(world: World) -> None:
    before = world.client.dbsize()
    answers = []
    r = world.call("GET", PATH, "nobody-holds-this-token")
    answers.append(r)
    assert r.status_code == 401
    assert r.json() == {"error": "forbidden_scope", "message": "forbidden_scope"}
    assert r.headers["WWW-Authenticate"] == 'Bearer error="invalid_token"'
    r = world.call("GET", PATH)
    answers.append(r)
    assert r.status_code == 401 and r.json()["error"] == "missing_credential"
    r = world.call("GET", PATH, headers={"Authorization": "Basic dXNlcjpwYXNz"})
    answers.append(r)
    assert r.status_code == 401 and r.json()["error"] == "malformed_credential"
    for answer in answers:
        assert "swarm-a" not in answer.text and "swarm-b" not in answer.text
    assert world.client.dbsize() == before


def test_the_openapi_document_lists_the_route() -> None:
    op = document()["paths"][PATH]["get"]
    assert op["x-auth"] == "operator_or_master"
    assert {"200", "401", "403"} <= set(op["responses"])
