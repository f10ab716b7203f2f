"""The worker lease on the real control API and real Redis: renewals, the fenced answer, and the wait.

A renewal is stamped with the swarm's clock. A fence whose death is not proven
(``node_lost``) records when the old worker has stopped at the latest (its last
renewal + lease + margin), and the replacement's Pod is created only after that;
a proven death (``oom_killed``) is replaced at once. The fenced attempt's own
credential is answered ``410 fenced`` on every worker route, and changes nothing.
"""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path

import pytest
from agentihooks_operator.recovery import workerlease
from agentihooks_operator.recovery.store.records import FenceRecord, Heartbeat
from testsupport.control_api import World, make_world
from testsupport.recovery import observe

LEASE_MS = 120_000


def _renew(w: World, eid: str, token: str | None = None, **body: object) -> dict[str, object]:
    resp = w.call("POST", f"/v1/executions/{eid}/lease", token or w.worker_token(eid), json=body)
    assert resp.status_code == 200, resp.text
    data = resp.json()
    assert isinstance(data, dict)
    return data


def _heartbeat(w: World, eid: str) -> Heartbeat:
    raw = w.client.hget(w.recoveries["swarm-a"].keys.heartbeats, eid)
    assert raw is not None
    return Heartbeat.model_validate_json(raw)


def _fence(w: World, eid: str) -> FenceRecord:
    raw = w.client.hget(w.recoveries["swarm-a"].keys.attempt_fences, eid)
    assert raw is not None
    return FenceRecord.model_validate_json(raw)


def _age_renewal(w: World, eid: str, *, left_ms: int) -> None:
    """Move the attempt's last renewal back so that its lease (with the margin) ends ``left_ms`` from now:
    as if the worker had last renewed that long ago (the swarm clock cannot be wound forward)."""
    key = w.recoveries["swarm-a"].keys.heartbeats
    hb = json.loads(w.client.hget(key, eid) or b"{}")
    sec, usec = w.client.time()
    now = int(sec) * 1000 + int(usec) // 1000
    hb["lease_at_ms"] = now + left_ms - LEASE_MS - workerlease.margin_ms(LEASE_MS)
    w.client.hset(key, eid, json.dumps(hb))


def test_a_renewal_is_stamped_and_carries_progress(redis_url: str, tmp_path: Path) -> None:
    with make_world(redis_url, tmp_path, progress=False) as w:
        eid = w.first["swarm-a"].execution_id
        got = _renew(w, eid, session_id="sess-9", watermark=7)
        assert got["lease_seconds"] == LEASE_MS / 1000
        hb = _heartbeat(w, eid)
        assert hb.lease_at_ms == got["renewed_at_ms"] and hb.lease_ms == LEASE_MS
        assert (hb.session_id, hb.archive_watermark) == ("sess-9", 7)
        bad = w.call("POST", f"/v1/executions/{eid}/lease", w.worker_token(eid), json={"watermark": -1})
        assert bad.status_code == 400 and _heartbeat(w, eid).archive_watermark == 7


def test_a_death_not_proven_waits_for_the_lease_and_a_proven_one_does_not(
    redis_url: str, tmp_path: Path
) -> None:
    with make_world(redis_url, tmp_path) as w:
        r, spec = w.recoveries["swarm-a"], w.specs["swarm-a"]
        eid = w.first["swarm-a"].execution_id
        _renew(w, eid)
        _age_renewal(w, eid, left_ms=3_000)
        report = r.reconcile(spec, observe([(eid, "eng-1", 1)], failed={eid: "node_lost"}))
        assert eid in report.fenced
        fence = _fence(w, eid)
        assert fence.old_attempt_stops_by_ms is not None
        decision = r.decide(eid, "fresh", "operator", spec=spec)  # an explicit choice does not skip it
        new = decision.replacement
        assert new is not None and new not in w.launcher.pods
        card = next(c for c in r.cards(spec) if c.execution_id == eid)
        assert card.old_attempt_stops_by == fence.old_attempt_stops_by_ms
        assert card.launch_blocked and card.launch_blocked.startswith(
            "waiting for the old attempt to stop until"
        )
        assert r.metrics().get("lease_waits_by_reason:node_lost") == 1
        running = observe([(new, "eng-1", 2)])
        deadline = time.monotonic() + 120
        while new not in w.launcher.pods:  # a later pass launches it once the lease is out
            assert time.monotonic() < deadline, "the replacement never launched"
            r.reconcile(spec, [o.model_copy(update={"state": "pending"}) for o in running])
            time.sleep(0.2)
        sec, _ = w.client.time()
        assert int(sec) * 1000 >= fence.old_attempt_stops_by_ms - 1000  # not launched before it

        # the same seat's next attempt dies a proven death: replaced at once, no wait
        w.recoveries["swarm-a"].unpause()
        _renew(w, new)
        r.reconcile(spec, observe([(new, "eng-1", 2)], failed={new: "oom_killed"}))
        assert _fence(w, new).old_attempt_stops_by_ms is None


def test_no_renewal_no_wait(redis_url: str, tmp_path: Path) -> None:
    """An attempt whose worker never renewed never ran its harness (the worker starts it only under an
    acknowledged lease), or predates leases: nothing to wait for."""
    with make_world(redis_url, tmp_path) as w:
        eid = w.fail(reason="node_lost")
        assert _fence(w, eid).old_attempt_stops_by_ms is None


def test_the_fenced_credential_is_answered_fenced_and_changes_nothing(redis_url: str, tmp_path: Path) -> None:
    with make_world(redis_url, tmp_path) as w:
        eid = w.first["swarm-a"].execution_id
        token = w.worker_token(eid)
        _renew(w, eid)
        before = _heartbeat(w, eid)
        w.fail(reason="node_lost")
        paths = [
            ("POST", f"/v1/executions/{eid}/lease", {"json": {}}),
            ("POST", f"/v1/executions/{eid}/watermark", {"json": {"watermark": 99}}),
            ("POST", f"/v1/executions/{eid}/session", {"json": {"session_id": "other"}}),
            (
                "GET",
                f"/v1/executions/{eid}/checkpoint-store/keys",
                {"params": {"swarm": "swarm-a", "task_id": "task-1", "task_generation": "1", "under": "x"}},
            ),
        ]
        for method, path, kw in paths:
            resp = w.call(method, path, token, **kw)  # type: ignore[arg-type]
            assert resp.status_code == 410, (path, resp.text)
            assert resp.json()["error"] == "fenced"
            assert "node_lost" in resp.json()["message"]
        assert _heartbeat(w, eid) == before  # nothing recorded
        # a forged token learns nothing; another attempt's live credential is not this one's
        forged = w.call("POST", f"/v1/executions/{eid}/lease", "x" + secrets.token_urlsafe(32), json={})
        assert forged.status_code == 401
        other = w.first["swarm-b"].execution_id
        foreign = w.call("POST", f"/v1/executions/{eid}/lease", w.worker_token(other), json={})
        assert foreign.status_code == 403
        # the fenced credential on another execution's routes is unknown there
        elsewhere = w.call("POST", f"/v1/executions/{other}/lease", token, json={})
        assert elsewhere.status_code in (401, 403)
        unknown = "exe-" + secrets.token_hex(16)  # an attempt the controller does not know
        assert w.call("POST", f"/v1/executions/{unknown}/lease", token, json={}).status_code == 401
        assert _heartbeat(w, eid) == before


@pytest.mark.parametrize("seconds", [14, 3601])
def test_a_lease_out_of_range_is_refused(seconds: int) -> None:
    from agentihooks_operator.swarm import SwarmSpec
    from pydantic import ValidationError
    from testsupport.control_api import swarm_with_masters

    body = swarm_with_masters({}).model_dump(by_alias=True, exclude_none=True)
    body["recovery"] = {**body.get("recovery", {}), "workerLeaseSeconds": seconds}
    with pytest.raises(ValidationError, match="workerLeaseSeconds"):
        SwarmSpec.model_validate(body)


def test_the_operator_may_confirm_a_lost_attempt_stopped_and_nobody_else(
    redis_url: str, tmp_path: Path
) -> None:
    """The deliberate override (``kubectl delete pod --force``'s counterpart): the replacement goes out at
    the next pass instead of after the lease; it is kept on the fence, logged and counted."""
    with make_world(redis_url, tmp_path) as w:
        r, spec = w.recoveries["swarm-a"], w.specs["swarm-a"]
        eid = w.first["swarm-a"].execution_id
        path = "/v1/namespaces/default/swarms/swarm-a/seats/eng-1/confirm-stopped"
        nothing = w.call("POST", path, w.tokens["operator"], json={})
        assert (nothing.status_code, nothing.json()["error"]) == (409, "not_fenced")
        _renew(w, eid)
        _age_renewal(w, eid, left_ms=3_600_000)  # an hour of lease left: far longer than this test
        r.reconcile(spec, observe([(eid, "eng-1", 1)], failed={eid: "node_lost"}))
        until = _fence(w, eid).old_attempt_stops_by_ms
        new = r.decide(eid, "fresh", "operator", spec=spec).replacement
        assert new is not None and new not in w.launcher.pods
        for who in (w.tokens["master@example-1"], w.worker_token(w.first["swarm-b"].execution_id)):
            refused = w.call("POST", path, who, json={})
            assert refused.status_code in (401, 403), refused.text
        assert _fence(w, eid).stop_confirmed_at_ms is None
        wrong = w.call("POST", path, w.tokens["operator"], json={"execution_id": "exe-" + "0" * 32})
        assert (wrong.status_code, wrong.json()["error"]) == (409, "not_fenced")
        ok = w.call("POST", path, w.tokens["operator"], json={})
        assert ok.status_code == 200, ok.text
        got = ok.json()
        assert (got["execution_id"], got["waited_until_ms"], got["replayed"]) == (eid, until, False)
        again = w.call("POST", path, w.tokens["operator"], json={"execution_id": eid})
        assert again.status_code == 200 and again.json()["replayed"] is True
        fence = _fence(w, eid)
        assert fence.old_attempt_stops_by_ms is None and fence.stop_confirmed_by == "operator"
        r.reconcile(spec, observe([(new, "eng-1", 2)]))  # the next pass launches it
        assert new in w.launcher.pods
        assert r.metrics().get("lease_wait_overrides:operator") == 1
        # nothing waits any more: a new confirmation of the same attempt is only the same answer
        assert w.call("POST", path, w.tokens["operator"], json={}).json()["replayed"] is True
