"""schemathesis against the OpenAPI document: no 5xx, and every answer is one the document lists.

A bounded number of examples per operation keeps this well under a minute; the
examples are derived from each test's name (``derandomize``), so every run
sends the same requests and a failure reproduces. It
runs twice per operation: with the operator's token (real swarms behind it) and
with a master's token; unauthenticated calls are part of the generated cases.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
import schemathesis
from agentihooks_operator.api.openapi import document
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from testsupport.control_api import MASTER_A, World, make_world

schema = schemathesis.openapi.from_dict(document())
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture(scope="module")
def live(redis_server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:  # type: ignore[no-untyped-def]
    if redis_server.proc is None:
        redis_server.start()
    flusher = redis.Redis.from_url(redis_server.url)
    flusher.flushall()  # this module's world is its own; earlier tests leave keys behind
    flusher.close()
    with make_world(redis_server.url, tmp_path_factory.mktemp("contract")) as w:
        eid = w.fail()
        w.checkpoint(eid)
        yield w


def _follow(case) -> bool:  # type: ignore[no-untyped-def]
    value = str((case.query or {}).get("follow", "")).lower()
    return value in ("1", "true", "yes")


@pytest.mark.parametrize("who", ["operator", MASTER_A])
@schema.parametrize()
@settings(
    max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), database=None, derandomize=True
)
def test_api_honours_its_document(case, live: World, who: str) -> None:  # type: ignore[no-untyped-def]
    if _follow(case):
        return  # an endless event stream; covered by test_swarm_routes
    headers = dict(case.headers or {})
    headers.setdefault("Authorization", f"Bearer {live.tokens[who]}")
    case.call_and_validate(base_url=live.url, headers=headers, checks=CHECKS)
