"""A Kubernetes call that fails under a decision is answered as what it is, never ``500 internal``.

Found by the fault campaign: with kube-apiserver restarting, a decision whose replacement Pod could not
be created was answered 500, which a master cannot tell from a bug. Unreachable (or 429/5xx) is now
``503 kubernetes_unavailable`` with ``Retry-After``, and repeating the decision then launches exactly
one replacement; a refusal (an RBAC 403) is ``502 kubernetes_refused`` naming the status. The
launcher is this API's Kubernetes edge; the rest is the real API over a real Redis.
"""

from __future__ import annotations

from typing import Any

import pytest
from agentihooks_operator.k8s.errors import ApiError
from testsupport.recovery import observe

from .conftest import World


def decide(world: World, eid: str, choice: str = "fresh") -> Any:
    body = {"choice": choice, "agent": "operator"}
    return world.call("POST", f"/v1/executions/{eid}/restore-decision", world.tokens["operator"], json=body)


def next_pass(world: World, eid: str) -> None:
    """The leader's next recovery pass (the failed attempt's Pod still seen failed)."""
    world.recoveries["swarm-a"].reconcile(
        world.specs["swarm-a"], observe([(eid, "eng-1", 1)], failed={eid: "oom_killed"})
    )


def raising_once(call: Any, error: BaseException) -> tuple[Any, list[tuple[Any, ...]]]:
    """``call`` that raises ``error`` the first time, and the arguments of that first call."""
    failed: list[tuple[Any, ...]] = []

    def once(*args: Any, **kw: Any) -> Any:
        if not failed:
            failed.append(args)
            raise error
        return call(*args, **kw)

    return once, failed


def failing_once(world: World, error: ApiError) -> list[tuple[Any, ...]]:
    """The launcher failing its first launch with ``error``; the list fills once it has."""
    world.launcher.launch, failed = raising_once(world.launcher.launch, error)  # type: ignore[method-assign]
    return failed


@pytest.mark.parametrize(
    ("status", "reason"),
    [(0, "transport error: NewConnectionError"), (503, "Service Unavailable"), (429, "x")],
)
def test_an_unreachable_api_server_is_503_and_the_retry_launches_once(
    world: World, status: int, reason: str
) -> None:
    eid = world.fail()
    failed = failing_once(world, ApiError(status, "POST", "/api/v1/namespaces/default/pods", reason))
    first = decide(world, eid)
    assert first.status_code == 503, first.text
    assert first.json()["error"] == "kubernetes_unavailable" and first.headers["Retry-After"] == "2"
    assert "/api/v1" not in first.text  # the call is the operator's log's business, not the caller's
    # the decision was stored before the launch failed: the retry is replayed, and the pass that
    # follows launches the one replacement (twice over: a second pass creates nothing more)
    again = decide(world, eid)
    assert again.status_code == 200 and again.json()["replayed"] is True, again.text
    replacement = again.json()["replacement"]
    next_pass(world, eid)
    next_pass(world, eid)
    assert failed and world.launcher.created[replacement] == 1
    assert sum(world.launcher.created.values()) == 3  # two first attempts (swarm-a, swarm-b) + this one
    assert decide(world, eid).json()["replacement"] == replacement


def test_a_refused_kubernetes_call_is_502_naming_its_status(world: World) -> None:
    eid = world.fail()
    failing_once(
        world, ApiError(403, "POST", "/api/v1/namespaces/default/pods", "Forbidden", "pods is forbidden")
    )
    first = decide(world, eid)
    assert first.status_code == 502, first.text
    assert first.json()["error"] == "kubernetes_refused" and "403 Forbidden" in first.json()["message"]
    assert "pods is forbidden" not in first.text
    again = decide(world, eid)
    assert again.status_code == 200, again.text
    next_pass(world, eid)
    assert world.launcher.created[again.json()["replacement"]] == 1


def test_a_write_not_confirmed_on_the_replicas_is_503_and_the_retry_decides(world: World) -> None:
    """Found by the fault campaign: a decision whose guarded write timed out in ``WAIT`` (a frozen
    Redis replica) was answered 500. Its outcome is unknown: 503 ``not_replicated``, retry."""
    from agentihooks_operator.recovery.store.durable import NotReplicated

    eid = world.fail()
    recovery = world.recoveries["swarm-a"]
    recovery.decide, _ = raising_once(recovery.decide, NotReplicated("1 of 2 replicas acknowledged"))  # type: ignore[method-assign]
    first = decide(world, eid)
    assert first.status_code == 503, first.text
    assert first.json()["error"] == "not_replicated" and first.headers["Retry-After"] == "2"
    assert "replicas acknowledged" not in first.text
    again = decide(world, eid)
    assert again.status_code == 200, again.text


@pytest.mark.parametrize(
    "error",
    ["ConnectionError", "MasterNotFoundError", "ReadOnlyError", "TimeoutError"],
)
def test_a_write_redis_did_not_answer_is_503_and_the_retry_decides(
    world: World, monkeypatch: pytest.MonkeyPatch, error: str
) -> None:
    """Found by the fault campaign (seed 1): a decision whose guarded write met a Sentinel failover
    (the connection refused, no primary named yet, a demoted primary answering READONLY) was
    answered ``500 internal``. The write's outcome is unknown and the retry replays it: 503
    ``redis_unavailable`` with ``Retry-After``, and the retry decides once."""
    import redis.sentinel
    from agentihooks_operator.recovery.store import writer

    kind = getattr(redis.exceptions, error, None) or getattr(redis.sentinel, error)
    eid = world.fail()
    once, failed = raising_once(writer.run_script, kind("the primary went away"))
    monkeypatch.setattr(writer, "run_script", once)
    first = decide(world, eid)
    assert len(failed) == 1
    assert first.status_code == 503, first.text
    assert first.json()["error"] == "redis_unavailable" and first.headers["Retry-After"] == "2"
    assert "went away" not in first.text
    again = decide(world, eid)
    assert again.status_code == 200, again.text
    replacement = again.json()["replacement"]
    next_pass(world, eid)
    next_pass(world, eid)
    assert world.launcher.created[replacement] == 1
    assert sum(world.launcher.created.values()) == 3  # two first attempts (swarm-a, swarm-b) + this one
    assert decide(world, eid).json()["replacement"] == replacement  # repeated: nothing new


def test_a_write_redis_refused_as_a_script_error_stays_500(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A script error is a fault of the write, not a failover: no retry would fix it, so it is not
    dressed as temporary."""
    import redis
    from agentihooks_operator.recovery.store import writer

    eid = world.fail()

    def broken(*args: Any, **kw: Any) -> Any:
        raise redis.exceptions.ResponseError("ERR user_script:1: boom")

    monkeypatch.setattr(writer, "run_script", broken)
    answer = decide(world, eid)
    assert answer.status_code == 500 and answer.json()["error"] == "internal", answer.text
    assert "boom" not in answer.text


def test_a_request_whose_clients_close_because_the_operator_stops_is_503_not_500(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the 30-minute fault campaign (seed 1): a SIGTERMed replica closes its Redis and
    Kubernetes clients while a decision is in flight, and the request failed with a ``ValueError``
    answered ``500 internal``. Once the operator was told to stop, such a failure is temporary:
    ``503 stopping`` with ``Retry-After``; the decision posted again (to any replica) replays it."""
    from agentihooks_operator.recovery.store import writer

    eid = world.fail()
    stopping = [False]
    monkeypatch.setattr(world.state, "kopf_ready", lambda: not stopping[0])
    once, failed = raising_once(writer.run_script, ValueError("I/O operation on closed file"))
    monkeypatch.setattr(writer, "run_script", once)
    stopping[0] = True  # SIGTERM arrived; the cleanup closed a client under the request
    first = decide(world, eid)
    assert len(failed) == 1
    assert first.status_code == 503, first.text
    assert first.json()["error"] == "stopping" and first.headers["Retry-After"] == "1"
    assert "closed file" not in first.text
    stopping[0] = False  # (another replica, or this one before the signal)
    again = decide(world, eid)
    assert again.status_code == 200, again.text
    next_pass(world, eid)
    assert world.launcher.created[again.json()["replacement"]] == 1


def test_an_unexpected_failure_while_running_stays_500(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentihooks_operator.recovery.store import writer

    eid = world.fail()
    monkeypatch.setattr(writer, "run_script", raising_once(writer.run_script, ValueError("boom"))[0])
    answer = decide(world, eid)
    assert answer.status_code == 500 and answer.json()["error"] == "internal", answer.text
