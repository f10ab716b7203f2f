"""Held recoveries over real HTTP (the live control API) and through the CLI: every code, and a race."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import redis
from agentihooks_operator.api import ApiState, SwarmRegistry
from agentihooks_operator.api.access.auth import sha256_hex
from agentihooks_operator.cli.main import app as cli
from agentihooks_operator.recovery import CrashAt, InjectedFault, Recovery
from agentihooks_operator.swarm import SwarmSpec
from testsupport.broker import Broker, broken_brokers, with_broker
from testsupport.control_api import Secrets, live_api, swarm_with_masters
from testsupport.recovery import dump_keys, observe
from typer.testing import CliRunner

SWARM = "swarm-h"


@dataclass
class Live:
    url: str
    op: str
    master: str
    recovery: Recovery
    spec: SwarmSpec
    registry: SwarmRegistry
    eid: str
    call: str
    obs: list[Any]

    def post(self, path: str, token: str | None = None, **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token or self.op}"}
        return httpx.post(self.url + path, headers=headers, timeout=30, **kw)

    def get(self, path: str, token: str | None = None) -> httpx.Response:
        return httpx.get(self.url + path, headers={"Authorization": f"Bearer {token or self.op}"}, timeout=30)

    def token(self) -> str:
        r = self.post(f"/v1/recoveries/{self.call}/token")
        assert r.status_code == 200, r.text
        return str(r.json()["resume_token"])


@pytest.fixture
def live(make, broker: Broker, client: redis.Redis) -> Iterator[Live]:  # type: ignore[no-untyped-def]
    """One seat held before anything reached the broker (a crash between the mark and the send)."""
    op, master = "op-" + secrets.token_urlsafe(24), "ma-" + secrets.token_urlsafe(24)
    spec = with_broker(swarm_with_masters({"master@example-1": "master-a"}), broker.url)
    registry = SwarmRegistry(Secrets({"master-a": master}))
    state = ApiState(registry=registry, redis=client, operator_hash=sha256_hex(op))
    r = make()
    eid = r.ensure_seats(spec)[0].execution_id
    obs = observe([(eid, "eng-1", 1)], failed={eid: "oom_killed"})
    broker.mode = "refuse_state"
    with pytest.raises(InjectedFault):
        make(faults=CrashAt("before:broker_release")).reconcile(spec, obs)
    r = make()
    r.reconcile(spec, obs)
    [h] = r.held_recoveries()
    registry.publish(SWARM, r, spec, holder="ctl-a")
    with live_api(state) as server:
        yield Live(server.url, op, master, r, spec, registry, eid, h.call, obs)


def test_listing_and_tokens_are_the_operators(live: Live) -> None:
    r = live.get(f"/v1/swarms/{SWARM}/recoveries")
    assert r.status_code == 200
    [row] = r.json()["recoveries"]
    assert (row["call"], row["seat"], row["step"]) == (live.call, "eng-1", "release_account")
    assert "token" not in r.text
    assert live.get(f"/v1/swarms/{SWARM}/recoveries", live.master).status_code == 403
    assert live.post(f"/v1/recoveries/{live.call}/token", live.master).status_code == 403
    denied = live.post(f"/v1/recoveries/{live.call}/resume", live.master, json={"resume_token": "x"})
    assert denied.status_code == 403 and denied.json()["error"] == "forbidden_scope"
    assert live.get("/v1/swarms/nope/recoveries").status_code == 404


def _state(client: redis.Redis) -> dict[bytes, object]:
    # Everything but the lease record, whose expiry every leader call renews.
    return {k: v for k, v in dump_keys(client).items() if not k.endswith(b":control-owner")}


def test_every_refusal_by_a_real_request(live: Live, broker: Broker, make, client, caplog) -> None:  # type: ignore[no-untyped-def]
    caplog.set_level("DEBUG")
    token = live.token()
    path = f"/v1/recoveries/{live.call}/resume"
    before = list(broker.requests)
    stored = _state(client)

    r = live.post("/v1/recoveries/rc-0000000000000000/resume", json={"resume_token": token})
    assert (r.status_code, r.json()["error"]) == (404, "checkpoint_not_found")

    r = live.post(path, json={"resume_token": "not-it", "observed": {"release_account": "applied"}})
    assert (r.status_code, r.json()["error"]) == (403, "resume_token_invalid")

    r = live.post(
        path, json={"resume_token": token, "observed": {"fence": "applied", "release_account": "maybe"}}
    )
    assert (r.status_code, r.json()["error"]) == (400, "observed_invalid")
    steps = {s["step"]: s for s in r.json()["state"]["steps"]}
    assert steps["fence"]["accepts"] == [] and "ok" in steps["fence"]["reason"]
    assert steps["release_account"]["accepts"] == ["applied", "not_applied"]

    r = live.post(path, json={"resume_token": token, "observed": {"nowhere": "applied"}})
    assert (r.status_code, r.json()["state"]["steps"][0]["reason"]) == (400, "no such step")

    r = live.post(path, json={"resume_token": token})
    assert (r.status_code, r.json()["error"]) == (400, "observed_required")
    assert r.json()["state"]["steps"] == [
        {"step": "release_account", "status": "held", "accepts": ["applied", "not_applied"]}
    ]

    r = live.post(path, json={"resume_token": token, "extra": 1})
    assert (r.status_code, r.json()["error"]) == (400, "invalid_body")

    moved = with_broker(live.spec, "http://127.0.0.1:9")
    live.registry.publish(SWARM, live.recovery, moved, holder="ctl-a")
    r = live.post(path, json={"resume_token": token, "observed": {"release_account": "not_applied"}})
    assert (r.status_code, r.json()["error"]) == (409, "plan_changed")
    live.registry.publish(SWARM, live.recovery, live.spec, holder="ctl-a")

    assert broker.requests == before  # nothing was sent by any refusal
    assert _state(client) == stored  # and nothing was written
    assert token not in repr(r.json())

    # resume_failed: a controller that crashes inside the resume (200, record dropped).
    crashing = make(brokers=broken_brokers)
    live.registry.publish(SWARM, crashing, live.spec, holder="ctl-a")
    r = live.post(path, json={"resume_token": token, "observed": {"release_account": "not_applied"}})
    assert (
        r.status_code == 200 and r.json()["error"] == "resume_failed" and r.json().get("resume_token") is None
    )
    r = live.post(path, json={"resume_token": token, "observed": {"release_account": "applied"}})
    assert (r.status_code, r.json()["error"]) == (404, "checkpoint_not_found")
    assert broker.applied[live.eid] == 0
    assert "resume of" in caplog.text and token not in caplog.text  # logged, without the token


def test_two_resumes_race_one_wins(live: Live, broker: Broker) -> None:
    token = live.token()
    path = f"/v1/recoveries/{live.call}/resume"
    body = {"resume_token": token, "observed": {"release_account": "not_applied"}}
    broker.mode = "normal"
    broker.gate = threading.Event()
    broker.received.clear()
    first: list[httpx.Response] = []
    t = threading.Thread(target=lambda: first.append(live.post(path, json=body)))
    t.start()
    assert broker.received.wait(30)  # the first resume is at the broker now
    second = live.post(path, json=body)
    broker.gate.set()
    t.join(30)
    assert (second.status_code, second.json()["error"]) == (404, "checkpoint_not_found")
    assert first[0].status_code == 200 and first[0].json()["status"] == "ok"
    assert broker.applied[live.eid] == 1
    progress = {s["path"]: s["status"] for s in first[0].json()["progress"]}
    assert progress["release_account"] == "ok" and progress["decide"] == "ok"


def test_cli_lists_issues_and_answers(live: Live, broker: Broker) -> None:
    runner = CliRunner()
    base = ["--control-url", live.url, "--token", live.op, "swarm", SWARM]
    out = runner.invoke(cli, [*base, "recoveries"])
    assert out.exit_code == 0, out.output
    assert live.call in out.output and "eng-1" in out.output and "release_account" in out.output
    out = runner.invoke(cli, [*base, "recovery-token", live.call])
    assert out.exit_code == 0
    token = out.output.strip()
    bad = runner.invoke(cli, [*base, "resume-recovery", live.call, "--token", token])
    assert bad.exit_code == 1 and "observed_required" in bad.output and "release_account" in bad.output
    bad = runner.invoke(cli, [*base, "resume-recovery", live.call, "--token", token, "--observed", "x"])
    assert bad.exit_code == 1 and "STEP=applied" in bad.output
    # The operator looked: the slot is still active at the broker, so it is sent again (still unobservable).
    out = runner.invoke(
        cli,
        [*base, "resume-recovery", live.call, "--token", token, "--observed", "release_account=not_applied"],
    )
    assert out.exit_code == 0, out.output
    assert "still held" in out.output and broker.applied[live.eid] == 1
    new = out.output.rsplit("--token ", 1)[1].strip()
    out = runner.invoke(
        cli, [*base, "resume-recovery", live.call, "--token", new, "--observed", "release_account=applied"]
    )
    assert out.exit_code == 0, out.output
    assert "release_account  ok" in out.output
    assert runner.invoke(cli, [*base, "recoveries"]).output.strip() == "no held recoveries"
    assert broker.applied[live.eid] == 1
