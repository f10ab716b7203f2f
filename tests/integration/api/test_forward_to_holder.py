"""A write that needs a swarm's lease works through whichever replica it reaches: the replica without
the lease forwards it once to the holder's advertised address.

Two live control APIs over one real Redis: the ``world`` replica (``ctl-a``)
holds both swarms' leases; a second one (``ctl-b``) serves the same swarms
without them, as every replica behind the chart's Service does. Each test says
what the holder advertised (its address, a stale one, a closed port, nothing).
"""

from __future__ import annotations

import json
import logging
import secrets
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
import pytest
import redis
from agentihooks_operator.api import ApiState, SwarmRegistry
from agentihooks_operator.api.access.auth import sha256_hex
from agentihooks_operator.api.access.endpoints import STALE_MS, Endpoints, endpoints_key
from agentihooks_operator.api.access.forward import FORWARDED_BY
from agentihooks_operator.api.access.peers import Peers
from agentihooks_operator.recovery import Recovery
from testsupport.control_api import Secrets, World, live_api

RELAUNCH = "/v1/swarms/swarm-a/seats/eng-1/relaunch"


@dataclass
class Replica:
    url: str
    standby: dict[str, Recovery]

    def call(self, method: str, path: str, token: str, body: object, **headers: str) -> httpx.Response:
        h = {"Authorization": f"Bearer {token}", **headers}
        with httpx.Client(base_url=self.url, headers=h, timeout=30) as c:
            return c.request(method, path, json=body)


@contextmanager
def second_replica(
    world: World, redis_url: str, operator_token: str | None = None, peers: Peers | None = None
) -> Iterator[Replica]:
    """A replica ``ctl-b`` serving both swarms without their leases (same masters, same operator);
    ``peers`` decides which advertised addresses it contacts (default: loopback ones)."""
    client = redis.Redis.from_url(redis_url)
    registry = SwarmRegistry(Secrets({"master-a": "unused", "master-b": "unused"}))
    standby = {}
    for swarm, spec in world.specs.items():
        standby[swarm] = Recovery(
            client, swarm, holder="ctl-b", catalog=world.store, launcher=world.launcher, namespace="default"
        )
        assert not standby[swarm].acquire()  # ctl-a holds it
        registry.publish(swarm, standby[swarm], spec, holder="ctl-b")
    token = operator_token or world.tokens["operator"]
    state = ApiState(registry=registry, redis=client, operator_hash=sha256_hex(token), catalog=world.store)
    if peers is not None:
        state.peers = peers
    try:
        with live_api(state) as server:
            yield Replica(server.url, standby)
    finally:
        client.close()


def refused_replacement(world: World) -> str:
    """eng-1 of swarm-a failed, resumed by the holder; returns its replacement (which will refuse)."""
    lost = world.fail()
    world.checkpoint(lost)
    decided = world.recoveries["swarm-a"].decide(lost, "resume", "operator", spec=world.specs["swarm-a"])
    assert decided.replacement is not None
    return decided.replacement


def advertise(world: World, url: str) -> None:
    Endpoints(world.client, "agentihooks").advertise("ctl-a", url)


def launched(world: World) -> int:
    return sum(world.launcher.created.values())


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def assert_not_leader(answer: httpx.Response) -> None:
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"] == "not_leader" and answer.headers["Retry-After"] == "2"


def test_a_worker_report_and_a_relaunch_through_the_other_replica_are_made_once(
    world: World, redis_url: str
) -> None:
    refused = refused_replacement(world)
    holder = world.recoveries["swarm-a"]
    advertise(world, world.url)
    with second_replica(world, redis_url) as b:
        writes = holder.writes_applied
        report = {"execution_id": refused, "reason": "version_changed", "message": "version_changed"}
        answer = b.call(
            "POST", f"/v1/executions/{refused}/restore-refusal", world.worker_token(refused), report
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["reason"] == "version_changed" and answer.json()["relaunched_as"] is None
        assert holder.writes_applied == writes + 1  # the refusal script ran once, on the holder
        pods = launched(world)
        answer = b.call("POST", RELAUNCH, world.tokens["operator"], {})
        assert answer.status_code == 200, answer.text
        relaunched = answer.json()
        assert relaunched["refused"] == refused and not relaunched["replayed"]
        assert launched(world) == pods + 1 and world.launcher.created[relaunched["replacement"]] == 1
        assert holder.current_execution("eng-1") == relaunched["replacement"]
        again = b.call("POST", RELAUNCH, world.tokens["operator"], {})  # a client's retry: the same one
        assert again.json()["replayed"] and again.json()["replacement"] == relaunched["replacement"]
        assert launched(world) == pods + 1
        assert b.standby["swarm-a"].writes_applied == b.standby["swarm-a"].writes_refused == 0
        # a route that names its swarm in the path and reads no body: pause
        paused = b.call("POST", "/v1/swarms/swarm-b/pause", world.tokens["operator"], None)
        assert paused.status_code == 200 and paused.json() == {"swarm": "swarm-b", "paused": True}
        assert world.recoveries["swarm-b"].paused()


def test_a_request_already_forwarded_is_not_forwarded_again(world: World, redis_url: str) -> None:
    refused_replacement(world)
    advertise(world, world.url)
    with second_replica(world, redis_url) as b:
        pods = launched(world)
        answer = b.call("POST", RELAUNCH, world.tokens["operator"], {}, **{FORWARDED_BY: "ctl-c"})
        assert_not_leader(answer)
        assert launched(world) == pods


@pytest.mark.parametrize("where", ["nothing", "stale", "closed port"])
def test_without_a_reachable_holder_the_answer_is_not_leader(
    world: World, redis_url: str, where: str
) -> None:
    refused = refused_replacement(world)
    key = endpoints_key("agentihooks")
    if where == "stale":
        at = int(world.client.time()[0]) * 1000 - 2 * STALE_MS
        world.client.hset(key, "ctl-a", json.dumps({"url": world.url, "at": at}))
    elif where == "closed port":
        advertise(world, f"http://127.0.0.1:{closed_port()}")
    with second_replica(world, redis_url) as b:
        report = {"execution_id": refused, "reason": "version_changed", "message": "version_changed"}
        assert_not_leader(
            b.call("POST", f"/v1/executions/{refused}/restore-refusal", world.worker_token(refused), report)
        )
        assert_not_leader(b.call("POST", RELAUNCH, world.tokens["operator"], {}))
    assert world.recoveries["swarm-a"].current_execution("eng-1") == refused  # nothing was relaunched


def test_the_holder_checks_the_forwarded_credential_and_no_log_shows_it(
    world: World, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The asking replica trusts a token the holder does not know: the holder's 401 is the answer."""
    caplog.set_level(logging.DEBUG)
    refused = refused_replacement(world)
    advertise(world, world.url)
    forged = "op-" + secrets.token_urlsafe(24)
    secret_words = "body-" + secrets.token_hex(8)
    with second_replica(world, redis_url, operator_token=forged) as b:
        pods = launched(world)
        answer = b.call("POST", RELAUNCH, forged, {"agent": secret_words})
        assert answer.status_code == 401, answer.text  # the holder's refusal, passed back as is
        assert launched(world) == pods
        report = {"execution_id": refused, "reason": "version_changed", "message": secret_words}
        worker = world.worker_token(refused)
        ok = b.call("POST", f"/v1/executions/{refused}/restore-refusal", worker, report)
        assert ok.status_code == 200 and ok.json()["message"] == secret_words
    text = caplog.text
    assert "forwarded to ctl-a" in text  # the forwarding is logged, by route and holder
    refusals = [r for r in caplog.records if "the recovery request for" in r.getMessage()]
    assert len(refusals) == 1  # the holder's refusal line; the forwarding replica does not repeat it
    for secret in (forged, worker, world.tokens["operator"], secret_words, sha256_hex(forged)):
        assert secret not in text


@contextmanager
def capturing_holder(host: str = "127.0.0.1") -> Iterator[tuple[str, list[bytes]]]:
    """A plain HTTP server on ``host`` standing in for the holder: it keeps every request it gets, raw."""
    import http.server
    import threading

    seen: list[bytes] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            seen.append(self.requestline.encode() + b"\r\n" + bytes(self.headers) + self.rfile.read(length))
            body = b'{"error": "captured", "message": "captured"}'
            self.send_response(418)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer((host, 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def _assertion(raw: bytes) -> str:
    from agentihooks_operator.api.access.assertion import HEADER

    unfolded = raw.replace(b"\r\n", b"\n").replace(b"\n ", b" ")  # the recorder folds long lines
    for line in unfolded.split(b"\n"):
        name, _, value = line.partition(b":")
        if name.decode().lower() == HEADER.lower():
            return value.strip().decode()
    raise AssertionError("no assertion in the forwarded request")


def test_a_forwarded_request_carries_no_caller_credential_and_its_assertion_works_once(
    world: World, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    from agentihooks_operator.api.access.assertion import HEADER

    caplog.set_level(logging.DEBUG)
    refused = refused_replacement(world)
    report = {"execution_id": refused, "reason": "version_changed", "message": "version_changed"}
    said = world.call(
        "POST", f"/v1/executions/{refused}/restore-refusal", world.worker_token(refused), json=report
    )
    assert said.status_code == 200, said.text
    operator = world.tokens["operator"]
    body = json.dumps({}).encode()
    with capturing_holder() as (url, seen), second_replica(world, redis_url) as b:
        advertise(world, url)
        answer = b.call("POST", RELAUNCH, operator, {})
        assert answer.status_code == 418, answer.text  # the stand-in's answer, passed back
        assert len(seen) == 1
        raw = seen[0]
        assert b"authorization" not in raw.lower() and operator.encode() not in raw
        assertion = _assertion(raw)
        assert assertion.startswith("v1.") and sha256_hex(operator) in assertion
    pods = launched(world)
    marked = {"Content-Type": "application/json", FORWARDED_BY: "ctl-b", HEADER: assertion}
    with httpx.Client(base_url=world.url, timeout=30) as c:
        # Bound to its body: the same assertion over another body is refused, and makes nothing.
        other = c.post(RELAUNCH, content=b'{"fresh": true}', headers=marked)
        assert other.status_code == 401 and launched(world) == pods
        # The real holder accepts it once, as the operator it vouches for ...
        first = c.post(RELAUNCH, content=body, headers=marked)
        assert first.status_code == 200, first.text
        assert launched(world) == pods + 1
        # ... and never again (replayed), nor under another path.
        again = c.post(RELAUNCH, content=body, headers=marked)
        assert again.status_code == 401
        elsewhere = c.post("/v1/swarms/swarm-b/pause", content=b"", headers=marked)
        assert elsewhere.status_code == 401
    assert launched(world) == pods + 1
    reasons = [r.getMessage() for r in caplog.records if "refused a forwarded" in r.getMessage()]
    assert any("bad signature" in m for m in reasons) and any("replayed" in m for m in reasons)
    assert assertion not in caplog.text and operator not in caplog.text


@pytest.mark.parametrize("forgery", ["garbage", "wrong key", "expired", "no marker"])
def test_a_forged_or_expired_assertion_is_refused(world: World, forgery: str) -> None:
    import time

    from agentihooks_operator.api.access.assertion import HEADER, Assertions

    refused_replacement(world)
    digest = sha256_hex(world.tokens["operator"])
    body = b"{}"
    if forgery == "garbage":
        value = "v1.1.2.3.4"
    elif forgery == "wrong key":
        other = Assertions(world.client, "agentihooks")
        other._key = b"not-the-replicas-key"  # type: ignore[attr-defined]
        value = other.sign("POST", RELAUNCH, body, digest)
    else:
        past = Assertions(world.client, "agentihooks", clock=lambda: time.time() - 3600)
        value = past.sign("POST", RELAUNCH, body, digest)
    headers = {"Content-Type": "application/json", HEADER: value}
    if forgery != "no marker":
        headers[FORWARDED_BY] = "ctl-b"
    pods = launched(world)
    answer = world.call("POST", RELAUNCH, None, content=body, headers=headers)
    assert answer.status_code == 401, answer.text
    assert launched(world) == pods


@pytest.mark.parametrize("shape", ["/steal", "/?next=x", "/#x", "name"])
def test_an_address_that_is_not_a_plain_ip_and_port_is_never_contacted(
    world: World, redis_url: str, shape: str
) -> None:
    """A registry entry with a path, query, fragment or host name: not_leader, and no connection is made."""
    refused_replacement(world)
    with socket.socket() as trap:
        trap.bind(("127.0.0.1", 0))
        trap.listen(8)
        port = trap.getsockname()[1]
        url = f"http://localhost:{port}" if shape == "name" else f"http://127.0.0.1:{port}{shape}"
        advertise(world, url)
        with second_replica(world, redis_url) as b:
            assert_not_leader(b.call("POST", RELAUNCH, world.tokens["operator"], {}))
        trap.setblocking(False)
        with pytest.raises(BlockingIOError):
            trap.accept()  # nobody ever connected to the advertised address
