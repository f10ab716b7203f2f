"""Every refused recovery request produces the controller's refusal line, whichever layer refused it.

``controller: the recovery request for EXECUTION was refused: REASON``, once
per refused request, on the live API (real aiohttp server, real Redis):
refused by route validation (body, execution id, size), by the credential
checks (none, unknown, another swarm's master, another agent, a worker), by a
lookup (unknown execution or seat) and by the recovery core (not pending, no
checkpoint), on the decision route and on the CLI's seat route. Accepted and
recorded requests log no such line, and the line never holds a token.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from agentihooks_operator.recovery import NO_CHECKPOINT, NOT_PENDING, NOT_REFUSED

from .conftest import MASTER_A, MASTER_B, World

PREFIX = "controller: the recovery request for "


def lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage().startswith(PREFIX)]


def decision(w: World, eid: str, token: str | None, **body: Any) -> httpx.Response:
    payload = {"choice": "resume", "agent": MASTER_A, **body}
    return w.call("POST", f"/v1/executions/{eid}/restore-decision", token, json=payload)


def seat_request(w: World, token: str | None, seat: str = "eng-1", **body: Any) -> httpx.Response:
    payload = {"choice": "resume", **body}
    return w.call("POST", f"/v1/swarms/swarm-a/seats/{seat}/restore-request", token, json=payload)


def namespaced(w: World, token: str | None, tail: str, seat: str = "eng-1", **body: Any) -> httpx.Response:
    """A seat route under the Swarm's namespace, as the CLI and the ledger send it."""
    return w.call("POST", f"/v1/namespaces/default/swarms/swarm-a/seats/{seat}/{tail}", token, json=body)


Case = Callable[[World, str], httpx.Response]

#: (name, the request, status, reason in the line, the execution named: "eid", "seat" or a literal)
CASES: list[tuple[str, Case, int, str, str]] = [
    # route validation
    (
        "invalid body",
        lambda w, e: decision(w, e, w.tokens["operator"], choice="later"),
        400,
        "invalid body",
        "eid",
    ),
    (
        "not JSON",
        lambda w, e: w.call(
            "POST",
            f"/v1/executions/{e}/restore-decision",
            w.tokens["operator"],
            content=b"{not json",
            headers={"Content-Type": "application/json"},
        ),
        400,
        "not valid JSON",
        "eid",
    ),
    (
        "too large",
        lambda w, e: decision(w, e, w.tokens["operator"], agent="a" * 70000),
        413,
        "at most",
        "eid",
    ),
    ("not an execution id", lambda w, e: decision(w, "exe-nope", w.tokens["operator"]), 400, "", "exe-nope"),
    # credentials and scope
    ("no credential", lambda w, e: decision(w, e, None), 401, "bearer token", "eid"),
    ("unknown credential", lambda w, e: decision(w, e, "not-a-known-token"), 401, "forbidden_scope", "eid"),
    (
        "another swarm's master",
        lambda w, e: decision(w, e, w.tokens[MASTER_B], agent=MASTER_B),
        403,
        "forbidden_scope",
        "eid",
    ),
    (
        "another agent",
        lambda w, e: decision(w, e, w.tokens[MASTER_A], agent=MASTER_B),
        403,
        "forbidden_scope",
        "eid",
    ),
    (
        "a worker",
        lambda w, e: decision(w, e, w.worker_token(w.first["swarm-b"].execution_id)),
        403,
        "forbidden_scope",
        "eid",
    ),
    # lookups
    (
        "unknown execution",
        lambda w, e: decision(w, "exe-" + "0" * 32, w.tokens["operator"]),
        404,
        "",
        "exe-" + "0" * 32,
    ),
    (
        "unknown seat",
        lambda w, e: seat_request(w, w.tokens["operator"], seat="eng-9"),
        404,
        "",
        "seat swarm-a/eng-9",
    ),
    # the recovery rules
    (
        "relaunch: nothing refused",
        lambda w, e: w.call("POST", "/v1/swarms/swarm-a/seats/eng-1/relaunch", w.tokens["operator"], json={}),
        409,
        NOT_REFUSED,
        "eid",
    ),
    ("no checkpoint", lambda w, e: decision(w, e, w.tokens["operator"]), 409, NO_CHECKPOINT, "eid"),
    ("seat: no checkpoint", lambda w, e: seat_request(w, w.tokens["operator"]), 409, NO_CHECKPOINT, "eid"),
    (
        "seat: invalid body",
        lambda w, e: seat_request(w, w.tokens["operator"], choice=7),
        400,
        "invalid body",
        "seat swarm-a/eng-1",
    ),
    (
        "seat: another agent",
        lambda w, e: seat_request(w, w.tokens[MASTER_A], agent=MASTER_B),
        403,
        "forbidden_scope",
        "seat swarm-a/eng-1",
    ),
    ("seat: no credential", lambda w, e: seat_request(w, None), 401, "bearer token", "seat swarm-a/eng-1"),
    # the same seat routes under the Swarm's namespace (issue 47: their refusals were never logged)
    (
        "namespaced: no checkpoint",
        lambda w, e: namespaced(w, w.tokens["operator"], "restore-request", choice="resume"),
        409,
        NO_CHECKPOINT,
        "eid",
    ),
    (
        "namespaced: invalid body",
        lambda w, e: namespaced(w, w.tokens["operator"], "restore-request", choice=7),
        400,
        "invalid body",
        "seat default/swarm-a/eng-1",
    ),
    (
        "namespaced: unknown seat",
        lambda w, e: namespaced(w, w.tokens["operator"], "restore-request", seat="eng-9", choice="resume"),
        404,
        "",
        "seat default/swarm-a/eng-9",
    ),
    (
        "namespaced: no credential",
        lambda w, e: namespaced(w, None, "restore-request", choice="resume"),
        401,
        "bearer token",
        "seat default/swarm-a/eng-1",
    ),
    (
        "namespaced relaunch: nothing refused",
        lambda w, e: namespaced(w, w.tokens["operator"], "relaunch"),
        409,
        NOT_REFUSED,
        "eid",
    ),
]


@pytest.mark.parametrize(("name", "send", "status", "reason", "subject"), CASES, ids=[c[0] for c in CASES])
def test_each_refused_request_logs_the_line_once(
    world: World,
    caplog: pytest.LogCaptureFixture,
    name: str,
    send: Case,
    status: int,
    reason: str,
    subject: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    eid = world.fail()  # eng-1 of swarm-a waits for a decision; it has no checkpoint
    caplog.clear()
    r = send(world, eid)
    assert r.status_code == status, r.text
    [line] = lines(caplog)
    expected_subject = eid if subject == "eid" else subject
    message = line.getMessage()
    assert message == f"{PREFIX}{expected_subject} was refused: {r.json()['message']}"
    assert reason in message
    assert line.levelno == (logging.WARNING if status == 409 else logging.INFO)
    for token in world.tokens.values():
        assert token not in caplog.text


def test_a_different_choice_after_the_accepted_one_is_logged_on_both_routes(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    eid = world.fail()
    world.checkpoint(eid)
    assert decision(world, eid, world.tokens["operator"]).status_code == 200
    caplog.clear()
    assert decision(world, eid, world.tokens["operator"], choice="fresh").status_code == 409
    assert seat_request(world, world.tokens["operator"], choice="fresh").status_code == 409
    assert [r.getMessage() for r in lines(caplog)] == [f"{PREFIX}{eid} was refused: {NOT_PENDING}"] * 2


def test_accepted_and_recorded_requests_log_no_refusal(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    eid = world.fail()
    world.checkpoint(eid)
    assert seat_request(world, world.tokens[MASTER_A]).status_code == 202  # recorded
    assert decision(world, eid, world.tokens[MASTER_A]).status_code == 200  # accepted now
    assert decision(world, eid, world.tokens[MASTER_A]).status_code == 200  # the same again
    assert lines(caplog) == []
