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
