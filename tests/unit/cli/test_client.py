"""How the CLI turns configuration problems and controller answers into one line (no network)."""

from __future__ import annotations

import httpx
import pytest
from agentihooks_operator.cli.client import EXIT_UNREACHABLE, CliError, ControlClient


def test_missing_or_bad_url_is_a_clear_error() -> None:
    with pytest.raises(CliError) as e:
        ControlClient(None, "tok")
    assert "AGENTIHOOKS_CONTROL_URL" in e.value.line and e.value.code == EXIT_UNREACHABLE
    with pytest.raises(CliError, match="http:// or https://"):
        ControlClient("localhost:8080", "tok")


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (
            401,
            {"error": "missing_credential", "message": "this route needs a bearer token"},
            "did not accept the token",
        ),
        (403, {"error": "forbidden_scope", "message": "forbidden_scope"}, "forbidden_scope"),
        (404, {"error": "unknown_swarm", "message": "unknown swarm: x"}, "unknown swarm: x"),
        (
            409,
            {"error": "not_pending", "message": "no recovery decision is pending for this attempt"},
            "no recovery decision is pending for this attempt",
        ),
        (503, {"error": "not_leader", "message": "retry"}, "not ready"),
        (500, None, "answered 500"),
    ],
)
def test_answers_become_one_line(status: int, body: object, expected: str) -> None:
    c = ControlClient("http://127.0.0.1:9", "secret-tok")
    resp = httpx.Response(status, json=body) if body is not None else httpx.Response(status, text="oops")
    err = c.fail(resp)
    assert expected in err.line and "\n" not in err.line and "secret-tok" not in err.line
    c.close()


@pytest.mark.parametrize(
    ("status", "code", "expected"),
    [
        (401, "forbidden_scope", "the controller did not accept the token (unknown or revoked token)"),
        (401, "missing_credential", "the controller did not accept the token (no token was sent: pass"),
        (401, "malformed_credential", "the controller did not accept the token (it is not a bearer token)"),
        (403, "forbidden_scope", "forbidden_scope: this token may not do that"),
    ],
)
def test_an_unknown_token_and_a_token_without_the_right_read_differently(
    status: int, code: str, expected: str
) -> None:
    """401: the controller does not know the token; 403: it knows it, and it does not grant this."""
    c = ControlClient("http://127.0.0.1:9", "secret-tok")
    err = c.fail(httpx.Response(status, json={"error": code, "message": code}))
    assert err.line.startswith(expected), err.line
    if status == 401:
        assert "forbidden_scope" not in err.line
    else:
        assert "did not accept" not in err.line
    c.close()


def test_an_operator_that_just_started_is_asked_again_after_its_retry_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 47: for about a second after an operator starts, a decision is answered ``503
    swarm_not_published``; the CLI repeats it after ``Retry-After`` (a decision may be repeated
    safely), and gives up with its one line after a few tries. Any other 503 is not repeated."""
    import agentihooks_operator.cli.client as client_module

    slept: list[float] = []
    monkeypatch.setattr(client_module.time, "sleep", slept.append)
    answers = [
        httpx.Response(
            503, json={"error": "swarm_not_published", "message": "m"}, headers={"Retry-After": "1"}
        ),
        httpx.Response(
            503, json={"error": "swarm_not_published", "message": "m"}, headers={"Retry-After": "99"}
        ),
        httpx.Response(200, json={"status": "accepted"}),
    ]
    sent: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.path)
        return answers.pop(0) if answers else httpx.Response(503, json={"error": "swarm_not_published"})

    c = ControlClient("http://127.0.0.1:9", "tok")
    c.http = httpx.Client(base_url="http://127.0.0.1:9", transport=httpx.MockTransport(handler))
    assert c.call("POST", "/v1/executions/e/restore-decision", json={}).body == {"status": "accepted"}
    assert len(sent) == 3 and slept == [1.0, 5.0]  # Retry-After obeyed, capped at 5 s
    sent.clear()
    with pytest.raises(CliError, match="not ready"):
        c.call("POST", "/v1/executions/e/restore-decision", json={})
    assert len(sent) == client_module.NOT_PUBLISHED_TRIES
    sent.clear()
    answers[:] = [httpx.Response(503, json={"error": "not_leader", "message": "m"})]
    with pytest.raises(CliError, match="not ready"):
        c.call("GET", "/v1/swarms", json=None)
    assert len(sent) == 1
