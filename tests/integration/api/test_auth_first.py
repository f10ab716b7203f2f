"""Authentication before any lookup: without a known token, a path's names cannot be probed.

For every route with a path parameter, a caller with no token, a malformed header, a token nobody
holds or a credential the fence revoked gets the same 401 whether the path names a swarm, seat,
execution or held recovery that exists or one that does not. The one exception: the revoked
credential on its own attempt's worker routes is answered ``410 fenced`` (its worker stops its
agent on it), which tells its holder nothing it did not know. A known token without the right gets
403, again whatever the path names; only the operator is told that a swarm does not exist (404).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from agentihooks_operator.api.openapi import document

from .conftest import MASTER_A, MASTER_B, World

LEDGER_DATA = ("GET", "/v1/swarms/{swarm}/ledger")  # served by the ledger package


def credentialed_routes() -> list[tuple[str, str]]:
    routes = {
        (method.upper(), path)
        for path, ops in document()["paths"].items()
        for method, op in ops.items()
        if "{" in path and op["x-auth"] != "none"
    }
    return sorted(routes | {LEDGER_DATA})


ROUTES = credentialed_routes()


def names(w: World, *, real: bool) -> dict[str, str]:
    if real:
        live = w.first["swarm-a"].execution_id
        return {
            "namespace": "default",
            "swarm": "swarm-a",
            "seat": "eng-1",
            "execution": live,
            "call": "rc-0123456789abcdef",
        }
    return {
        "namespace": "no-such-namespace",
        "swarm": "no-such-swarm",
        "seat": "eng-9",
        "execution": "exe-" + "f" * 32,
        "call": "rc-fedcba9876543210",
    }


def request_for(method: str, template: str, values: dict[str, str]) -> dict[str, Any]:
    kw: dict[str, Any] = {"url": template.format(**values)}
    if "checkpoint-store" in template:
        kw["params"] = {
            "key": "objects/sha256/" + "0" * 64,
            "swarm": values["swarm"],
            "task_id": "task-1",
            "task_generation": "1",
        }
    if method == "PUT":
        kw["content"] = b"x"
    elif method == "POST":
        kw["json"] = {"choice": "fresh", "agent": MASTER_A}
    return kw


def answers(w: World, method: str, template: str, headers: dict[str, str]) -> Iterator[httpx.Response]:
    with httpx.Client(base_url=w.url, timeout=30) as c:
        for real in (True, False):
            yield c.request(method, headers=headers, **request_for(method, template, names(w, real=real)))


def unknown_credentials(w: World) -> dict[str, dict[str, str]]:
    revoked = w.first["swarm-a"].worker_token.get_secret_value()
    return {
        "no token": {},
        "malformed": {"Authorization": "Basic dXNlcjpwYXNz"},
        "unknown token": {"Authorization": "Bearer nobody-holds-this-token"},
        "revoked worker credential": {"Authorization": f"Bearer {revoked}"},
    }


@pytest.mark.parametrize(("method", "template"), ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
def test_without_a_known_token_the_answer_is_401_whatever_the_path_names(
    world: World, method: str, template: str
) -> None:
    world.fail()  # swarm-a's first attempt is fenced: its credential is revoked
    before = world.client.dbsize()
    own_worker_route = document()["paths"][template][method.lower()]["x-auth"] == "worker"
    for who, headers in unknown_credentials(world).items():
        real, fake = answers(world, method, template, headers)
        if who == "revoked worker credential" and own_worker_route:
            assert (real.status_code, real.json()["error"]) == (410, "fenced"), real.text
            assert fake.status_code == 401 and "no-such-swarm" not in fake.text
            continue
        assert real.status_code == fake.status_code == 401, (who, real.text, fake.text)
        assert real.json() == fake.json(), who
        assert real.headers.get("WWW-Authenticate") == fake.headers.get("WWW-Authenticate"), who
        assert "swarm-a" not in real.text and "no-such-swarm" not in fake.text
    assert world.client.dbsize() == before


def test_an_unknown_token_is_refused_as_forbidden_scope_with_invalid_token(world: World) -> None:
    r = world.call("GET", "/v1/swarms/swarm-a/status", "nobody-holds-this-token")
    assert r.status_code == 401
    assert r.json() == {"error": "forbidden_scope", "message": "forbidden_scope"}
    assert r.headers["WWW-Authenticate"] == 'Bearer error="invalid_token"'
    assert world.call("GET", "/v1/swarms/swarm-a/status").json()["error"] == "missing_credential"


@pytest.mark.parametrize(("method", "template"), ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
def test_a_known_token_without_the_right_gets_403_whatever_the_path_names(
    world: World, method: str, template: str
) -> None:
    # a master of swarm-b, and a live worker of swarm-b: known to this controller, no rights on these
    others = [world.tokens[MASTER_B], world.worker_token(world.first["swarm-b"].execution_id)]
    for token in others:
        real, fake = answers(world, method, template, {"Authorization": f"Bearer {token}"})
        assert real.status_code == fake.status_code == 403, (real.text, fake.text)
        assert real.json() == fake.json() == {"error": "forbidden_scope", "message": "forbidden_scope"}


def test_only_the_operator_is_told_a_swarm_does_not_exist(world: World) -> None:
    op = world.call("GET", "/v1/swarms/no-such-swarm/status", world.tokens["operator"])
    assert op.status_code == 404 and op.json()["error"] == "unknown_swarm"
    master = world.call("GET", "/v1/swarms/no-such-swarm/status", world.tokens[MASTER_A])
    assert master.status_code == 403 and master.json()["error"] == "forbidden_scope"
    # the master's own swarm still answers
    assert world.call("GET", "/v1/swarms/swarm-a/status", world.tokens[MASTER_A]).status_code == 200


def test_head_on_the_ledger_data_route_is_authenticated_too(world: World) -> None:
    with httpx.Client(base_url=world.url, timeout=30) as c:
        real = c.head("/v1/swarms/swarm-a/ledger")
        fake = c.head("/v1/swarms/no-such-swarm/ledger")
    assert real.status_code == fake.status_code == 401
