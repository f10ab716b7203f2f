"""Error answers say what was wrong by field, never by value: nothing a caller sends comes back.

A marker is put in every place a caller controls — each path parameter, each query parameter, the
body's values and its keys — of every route in the OpenAPI document, under every kind of caller,
and must not appear in any answer (body or headers).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from agentihooks_operator.api.openapi import document

from .conftest import MASTER_A, World

MARK = "zq-echo-7f3a"  # valid as a name in a path, so every route is reached


def requests_with_marker() -> list[tuple[str, str, dict[str, Any]]]:
    out = []
    for template, ops in document()["paths"].items():
        for method, op in ops.items():
            url = template
            params = {}
            for p in op.get("parameters", []):
                if p["in"] == "path":
                    url = url.replace("{" + p["name"] + "}", MARK)
                else:
                    params[p["name"]] = MARK
            kw: dict[str, Any] = {"params": params}
            if method == "post":
                kw["json"] = {"choice": MARK, "agent": MARK, "session_id": MARK, MARK: MARK}
            elif method == "put":
                kw["content"] = MARK.encode()
            out.append((method.upper(), url, kw))
    return out


def callers(w: World) -> dict[str, str | None]:
    return {
        "none": None,
        "operator": w.tokens["operator"],
        "master": w.tokens[MASTER_A],
        "worker": w.worker_token(w.first["swarm-a"].execution_id),
    }


@pytest.mark.parametrize("who", ["none", "operator", "master", "worker"])
def test_no_answer_echoes_what_the_caller_sent(world: World, who: str) -> None:
    token = callers(world)[who]
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    seen = set()
    with httpx.Client(base_url=world.url, timeout=30, headers=headers) as c:
        for method, url, kw in requests_with_marker():
            r = c.request(method, url, **kw)
            seen.add(r.status_code)
            assert r.status_code < 500, (method, url, r.text)
            assert MARK not in r.text, (method, url, r.status_code, r.text)
            assert all(MARK not in v for v in r.headers.values()), (method, url)
    assert seen - {401, 403}, "no route got past authentication"


def test_the_operator_gets_field_level_messages(world: World) -> None:
    op = world.tokens["operator"]
    cases = [
        ("GET", f"/v1/swarms/{MARK}/status", {}, "unknown swarm: the swarm named in the path"),
        ("GET", f"/v1/swarms/swarm-a/seats/{MARK}/checkpoints", {}, "unknown seat: the swarm has no seat"),
        (
            "POST",
            f"/v1/executions/{MARK}/restore-decision",
            {"json": {"choice": "fresh", "agent": MASTER_A}},
            "the execution in the path is not an execution id",
        ),
        (
            "POST",
            "/v1/executions/exe-" + "0" * 32 + "/restore-decision",
            {"json": {"choice": "fresh", "agent": MASTER_A}},
            "unknown execution: no attempt has the execution id in the path",
        ),
        (
            "POST",
            "/v1/swarms/swarm-a/seats/eng-1/restore-request",
            {"json": {"choice": MARK, MARK: 1}},
            "invalid body: choice: Input should be 'resume' or 'fresh'; body: unexpected field",
        ),
        ("GET", "/v1/swarms/swarm-a/events", {"params": {"count": MARK}}, "count must be an integer"),
        (
            "POST",
            "/v1/recoveries/rc-0123456789abcdef/resume",
            {"json": {"resume_token": "t", "observed": {MARK: 5}}},
            "invalid body: observed.*: Input should be a valid string",
        ),
    ]
    for method, url, kw, message in cases:
        r = world.call(method, url, op, **kw)
        assert 400 <= r.status_code < 500, (url, r.text)
        assert r.json()["message"].startswith(message), (url, r.json())
        assert MARK not in r.text
