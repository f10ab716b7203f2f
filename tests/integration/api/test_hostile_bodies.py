"""Hostile bodies from callers holding a valid credential: deep nesting and oversized bodies.

A deeply nested JSON body is refused with 400 ``invalid_body`` before it is parsed (Python's parser
would recurse once per level and fail with a RecursionError: a 500 and an ERROR line per request),
logged once at INFO without a traceback. A body over the cap is 413, whether it announces its
length or arrives chunked. Nothing is changed by either.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from agentihooks_operator.api.common import JSON_CAP, JSON_MAX_DEPTH

from .conftest import World

JSON = {"Content-Type": "application/json"}
#: ~60 KB of nesting: ``[[[[...]]]]`` and ``{"a":{"a":...}}``, and one that is never closed.
DEEP = {
    "arrays": b"[" * 30_000 + b"]" * 30_000,
    "objects": b'{"a":' * 10_000 + b"1" + b"}" * 10_000,
    "unclosed": b"[" * 60_000,
}


def json_routes(w: World) -> list[tuple[str, str]]:
    """Every route with a JSON body, with a credential that passes its authentication and scope."""
    live = w.first["swarm-a"].execution_id
    return [
        (f"/v1/executions/{live}/restore-decision", w.tokens["operator"]),
        ("/v1/swarms/swarm-a/seats/eng-1/restore-request", w.tokens["operator"]),
        (f"/v1/executions/{live}/outcome", w.worker_token(live)),
        (f"/v1/executions/{live}/session", w.worker_token(live)),
        (f"/v1/executions/{live}/watermark", w.worker_token(live)),
        ("/v1/recoveries/rc-0123456789abcdef/resume", w.tokens["operator"]),
    ]


def api_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith(("agentihooks", "aiohttp"))]


@pytest.mark.parametrize("shape", sorted(DEEP))
def test_deeply_nested_json_is_400_invalid_body_logged_once_at_info(
    world: World, caplog: pytest.LogCaptureFixture, shape: str
) -> None:
    caplog.set_level(logging.DEBUG)
    before = world.client.dbsize()
    for path, token in json_routes(world):
        caplog.clear()
        r = world.call("POST", path, token, content=DEEP[shape], headers=JSON)
        assert r.status_code == 400, (path, r.status_code, r.text)
        assert r.json() == {
            "error": "invalid_body",
            "message": f"invalid body: the JSON nests deeper than {JSON_MAX_DEPTH} levels",
        }
        records = api_records(caplog)
        expected = [(logging.INFO, "agentihooks.api")]
        if "/restore-" in path:  # a recovery request: the controller's refusal line follows
            expected.append((logging.INFO, "agentihooks.api"))
            assert records[-1].getMessage().startswith("controller: the recovery request for ")
        assert [(r.levelno, r.name) for r in records] == expected, records
        assert records[0].exc_info is None and "Traceback" not in caplog.text
        assert "[[" not in caplog.text and '{"a"' not in caplog.text
    assert world.client.dbsize() == before


def test_nesting_up_to_the_limit_is_parsed_and_validated_as_usual(world: World) -> None:
    path, token = json_routes(world)[0]
    levels = JSON_MAX_DEPTH - 1
    body = b'{"choice": "resume", "agent": ' + b"[" * levels + b"]" * levels + b"}"
    r = world.call("POST", path, token, content=body, headers=JSON)
    assert r.status_code == 400 and r.json()["error"] == "invalid_body"
    assert "deeper" not in r.json()["message"] and "agent" in r.json()["message"]
    # brackets inside strings are text, not nesting
    text = '{"choice": "resume", "agent": "' + "[" * 100 + '"}'
    r = world.call("POST", path, token, content=text, headers=JSON)
    assert r.status_code == 400 and "deeper" not in r.json()["message"]


def _chunks(data: bytes, size: int = 4096) -> Iterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


def test_oversized_body_is_413_with_or_without_a_length(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    big = b'{"choice": "resume", "agent": "' + b"a" * (JSON_CAP + 10) + b'"}'
    for path, token in json_routes(world):
        for content in (big, _chunks(big)):  # Content-Length, then Transfer-Encoding: chunked
            r = world.call("POST", path, token, content=content, headers=JSON)
            assert r.status_code == 413, (path, r.status_code, r.text)
            assert r.json() == {
                "error": "body_too_large",
                "message": f"the JSON body may be at most {JSON_CAP} bytes",
            }
    assert not [r for r in api_records(caplog) if r.levelno >= logging.WARNING]


def test_a_body_of_exactly_the_cap_is_read_whole_even_when_it_arrives_in_pieces(world: World) -> None:
    path, token = json_routes(world)[0]
    prefix, suffix = b'{"choice": "resume", "agent": "', b'"}'
    body = prefix + b"a" * (JSON_CAP - len(prefix) - len(suffix)) + suffix
    assert len(body) == JSON_CAP
    r = world.call("POST", path, token, content=_chunks(body, 1000), headers=JSON)
    # read whole (not cut at the first piece): the agent is refused by its pattern, not as invalid JSON
    assert r.status_code == 400 and r.json()["error"] == "invalid_body", r.text
