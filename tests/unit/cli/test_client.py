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
