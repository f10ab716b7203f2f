"""A worker whose swarm the API has not published yet is told to retry (503), never refused (403).

The swarm ``swarm-c`` is admitted in Redis (its worker's credential exists)
but not in the API's registry, as in the second between the operator's first
pass and its next publish. Only the execution's own credential gets the 503:
a forged token is unknown (401), and a live credential naming another execution is refused (403).
"""

from __future__ import annotations

import threading

from agentihooks_checkpoint.stores.remote import ControlReporter
from agentihooks_operator.recovery import Recovery
from testsupport.control_api import swarm_with_masters

from .conftest import World


def unpublished(world: World) -> tuple[Recovery, str]:
    spec = swarm_with_masters({})
    r = Recovery(world.client, "swarm-c", holder="ctl-a", catalog=world.store, launcher=world.launcher)
    plan = r.ensure_seats(spec)[0]
    world.specs["swarm-c"] = spec
    return r, plan.execution_id


def session(world: World, eid: str, token: str):  # type: ignore[no-untyped-def]
    return world.call("POST", f"/v1/executions/{eid}/session", token, json={"session_id": "sess-9"})


def test_own_credential_gets_503_with_retry_after_until_the_swarm_is_published(world: World) -> None:
    r, eid = unpublished(world)
    token = world.worker_token(eid)
    early = session(world, eid, token)
    assert early.status_code == 503, early.text
    assert early.headers["Retry-After"] == "1"
    assert early.json()["error"] == "swarm_not_published"
    world.registry.publish("swarm-c", r, world.specs["swarm-c"], holder="ctl-a")
    assert session(world, eid, token).status_code == 200


def test_forged_token_and_unknown_execution_are_refused(world: World) -> None:
    _, eid = unpublished(world)
    forged = session(world, eid, "forged-" + "x" * 20)
    assert forged.status_code == 401 and forged.json()["error"] == "forbidden_scope"
    # a live credential (of swarm-b, published) naming an execution that is not its own
    unknown = session(world, "exe-" + "0" * 32, world.worker_token(world.first["swarm-b"].execution_id))
    assert unknown.status_code == 403 and unknown.json()["error"] == "forbidden_scope"
    # a published swarm's fenced (revoked) credential: its own attempt's routes answer 410 fenced
    # (its worker stops its agent), never 503; anywhere else it is unknown (401)
    revoked = world.worker_token(world.first["swarm-a"].execution_id)
    fenced = world.fail()
    assert session(world, fenced, revoked).status_code == 410
    assert session(world, eid, revoked).status_code == 401


def test_the_worker_reporter_retries_through_the_gap(world: World) -> None:
    r, eid = unpublished(world)
    answered = threading.Event()
    original = world.state.unpublished_worker

    def watched(execution_id: str, token: str) -> bool:
        result = original(execution_id, token)
        if result:
            answered.set()
        return result

    world.state.unpublished_worker = watched  # type: ignore[method-assign]
    publisher = threading.Thread(
        target=lambda: (
            answered.wait(30) and world.registry.publish("swarm-c", r, world.specs["swarm-c"], holder="ctl-a")
        )
    )
    publisher.start()
    reporter = ControlReporter(world.url, eid, world.worker_token(eid), retries=5)
    reporter.report_progress(eid, "sess-9", None)  # raises on a refusal
    publisher.join(30)
    assert answered.is_set()
    assert world.client.hget(r.keys.heartbeats, eid) is not None


def decide(world: World, eid: str, token: str, choice: str = "fresh"):  # type: ignore[no-untyped-def]
    body = {"choice": choice, "agent": "operator"}
    return world.call("POST", f"/v1/executions/{eid}/restore-decision", token, json=body)


def test_a_decision_for_an_unpublished_swarm_is_told_to_retry_not_that_it_does_not_exist(
    world: World,
) -> None:
    """Found by the fault campaign: a replica just restarted answered 404 ``unknown_execution`` for an
    attempt that exists, and a master would drop its decision. It is 503 until the swarm is published,
    and nothing is written meanwhile."""
    r, eid = unpublished(world)
    operator = world.tokens["operator"]
    before = world.client.hgetall(r.keys.attempt_recoveries)
    early = decide(world, eid, operator)
    assert early.status_code == 503, early.text
    assert early.json()["error"] == "swarm_not_published" and early.headers["Retry-After"] == "1"
    assert world.client.hgetall(r.keys.attempt_recoveries) == before
    # an id that no swarm holds is still unknown, published or not
    missing = decide(world, "exe-" + "0" * 32, operator)
    assert missing.status_code == 404 and missing.json()["error"] == "unknown_execution"
    world.registry.publish("swarm-c", r, world.specs["swarm-c"], holder="ctl-a")
    after = decide(world, eid, operator)  # published: the recovery rules answer (the attempt is live)
    assert after.status_code == 409 and after.json()["error"] == "not_pending", after.text
