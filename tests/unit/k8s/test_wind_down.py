"""A wind-down racing the clean-up that closes the Redis client is one log line, never a thread's crash.

CI saw redis-py fail inside its reader (``'NoneType' object has no attribute 'readline'``) when the
operator's clean-up closed the connection under a stopping swarm's lease release.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
import redis
from agentihooks_operator.k8s import handlers


def _held(error: BaseException) -> SimpleNamespace:
    def give_up() -> None:
        raise error

    return SimpleNamespace(
        owner=SimpleNamespace(name="example"),
        recovery=SimpleNamespace(give_up=give_up),
        close=lambda: None,
    )


@pytest.mark.parametrize(
    "error",
    [
        AttributeError("'NoneType' object has no attribute 'readline'"),
        redis.ConnectionError("Connection closed by server."),
        OSError("Bad file descriptor"),
    ],
    ids=["reader gone", "connection closed", "socket closed"],
)
def test_a_release_under_a_closed_client_is_one_warning(
    error: BaseException, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    handlers._wind_down(_held(error), give_up=True)  # type: ignore[arg-type]
    handlers._release(_held(error))  # type: ignore[arg-type]
    lines = [r for r in caplog.records if "example" in r.getMessage()]
    assert len(lines) == 2 and all(r.exc_info is None for r in lines)
    assert "Traceback" not in caplog.text


def test_a_bug_still_surfaces() -> None:
    with pytest.raises(KeyError):
        handlers._release(_held(KeyError("not a closed client")))  # type: ignore[arg-type]
