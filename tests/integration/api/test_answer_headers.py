"""Every answer carries ``nosniff`` and ``no-store``; a 405 names what its path allows.

Checked on every route of the OpenAPI document, the ledger page, its asset and data route, for
successes and refusals alike, and on the event stream. The ledger's own Content-Security-Policy
stays on its answers.
"""

from __future__ import annotations

import httpx
import pytest
from agentihooks_operator.api.openapi import document
from agentihooks_operator.ledger import CSP

from .conftest import MASTER_A, World

API_HEADERS = {"x-content-type-options": "nosniff", "cache-control": "no-store"}
LEDGER = ["/ledger/swarm-a", "/ledger/static/ledger.js", "/v1/swarms/swarm-a/ledger"]


def concrete(w: World, template: str) -> str:
    live = w.first["swarm-a"].execution_id
    values = {
        "namespace": "default",
        "swarm": "swarm-a",
        "seat": "eng-1",
        "execution": live,
        "call": "rc-0123456789abcdef",
    }
    return template.format(**values)


def assert_api_headers(r: httpx.Response) -> None:
    for name, value in API_HEADERS.items():
        assert r.headers.get(name) == value, (r.request.method, r.request.url.path, r.status_code, name)


def test_every_answer_of_every_route_is_nosniff_and_no_store(world: World) -> None:
    world.fail()
    tokens = [None, "nobody-holds-this", world.tokens["operator"], world.tokens[MASTER_A]]
    statuses = set()
    with httpx.Client(base_url=world.url, timeout=30) as c:
        for template, ops in document()["paths"].items():
            for method in ops:
                for token in tokens:
                    headers = {"Authorization": f"Bearer {token}"} if token else {}
                    kw = {"json": {"choice": "fresh"}} if method == "post" else {}
                    r = c.request(method.upper(), concrete(world, template), headers=headers, **kw)
                    statuses.add(r.status_code)
                    assert_api_headers(r)
        for path in [*LEDGER, "/ledger/static/nope.js", "/no/such/route"]:
            for token in tokens:
                headers = {"Authorization": f"Bearer {token}"} if token else {}
                r = c.get(path, headers=headers)
                statuses.add(r.status_code)
                assert_api_headers(r)
                if path.startswith("/ledger") or path.endswith("/ledger"):
                    assert r.headers["Content-Security-Policy"] == CSP
    assert {200, 400, 401, 403, 404} <= statuses


def test_the_event_stream_is_no_store_too(world: World) -> None:
    world.fail()
    headers = {"Authorization": f"Bearer {world.tokens['operator']}"}
    with (
        httpx.Client(base_url=world.url, timeout=30) as c,
        c.stream("GET", "/v1/swarms/swarm-a/events", params={"follow": "true"}, headers=headers) as r,
    ):
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        assert_api_headers(r)


@pytest.mark.parametrize("method", ["PATCH", "DELETE", "PUT", "TRACE"])
def test_405_carries_allow_with_the_paths_methods(world: World, method: str) -> None:
    with httpx.Client(base_url=world.url, timeout=30) as c:
        for template, ops in document()["paths"].items():
            declared = {m.upper() for m in ops}
            if method in declared:
                continue
            r = c.request(method, concrete(world, template))
            assert r.status_code == 405, (template, r.status_code)
            assert r.json()["error"] == "method_not_allowed"
            allowed = set(r.headers["Allow"].split(","))
            # HEAD is GET without the body (RFC 9110); aiohttp answers it where GET is served
            assert allowed - {"HEAD"} == declared, template
            assert "HEAD" not in allowed or "GET" in declared, template
            assert_api_headers(r)
