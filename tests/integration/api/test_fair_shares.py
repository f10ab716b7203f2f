"""Fair shares per credential on a live control API: one caller cannot take every connection slot.

One master's credential holds its share of open event streams and is refused the next one at once
(429, ``Retry-After``), while ``/healthz``, the other master and the operator are answered; one
worker's credential likewise with slow uploads; uploads together cannot spool past the shared
budget (507, ``Retry-After``, nothing left behind); a master's credential rotated under an open
stream ends that stream within a poll period. No timing is asserted: waits have generous bounds.
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import urlencode, urlparse

import httpx
import pytest
from agentihooks_operator.api.access.auth import sha256_hex
from testsupport.control_api import MASTER_A, MASTER_B, World

from .test_store_routes import replacement

BOUND = 60.0


def until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + BOUND
    while not check():
        assert time.monotonic() < deadline, f"not within {BOUND} s: {what}"
        time.sleep(0.05)


def _raw(w: World, request: bytes, stack: ExitStack) -> socket.socket:
    u = urlparse(w.url)
    assert u.hostname and u.port
    s = stack.enter_context(socket.create_connection((u.hostname, u.port), timeout=BOUND))
    s.sendall(request)
    return s


def _stream_request(w: World, token: str, swarm: str = "swarm-a") -> bytes:
    host = urlparse(w.url).netloc
    return (
        f"GET /v1/swarms/{swarm}/events?follow=true HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {token}\r\n\r\n"
    ).encode()


def _read_until(s: socket.socket, marker: bytes) -> bytes:
    got = b""
    while marker not in got:
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def _answered(w: World) -> None:
    """The API answers everyone else meanwhile."""
    assert w.call("GET", "/healthz").status_code == 200
    assert w.call("GET", "/v1/swarms/swarm-b/status", w.tokens[MASTER_B]).status_code == 200
    assert w.call("GET", "/v1/swarms/swarm-a/status", w.tokens["operator"]).status_code == 200


def test_one_masters_streams_stop_at_its_share_and_everyone_else_is_answered(world: World) -> None:
    share = world.state.quotas.streams
    digest = sha256_hex(world.tokens[MASTER_A])
    with ExitStack() as stack:
        streams = [_raw(world, _stream_request(world, world.tokens[MASTER_A]), stack) for _ in range(share)]
        for s in streams:
            assert b"200 OK" in _read_until(s, b"\r\n\r\n")
        until(lambda: world.state.quotas.held("streams", digest) == share, "every stream held")
        refused = world.call("GET", "/v1/swarms/swarm-a/events?follow=true", world.tokens[MASTER_A])
        assert refused.status_code == 429
        assert refused.json()["error"] == "too_many_streams"
        assert refused.headers["Retry-After"] == "5"
        assert refused.headers.get("Connection", "").lower() == "close"
        # A plain (non-following) read of the same credential is not a stream and is answered.
        assert world.call("GET", "/v1/swarms/swarm-a/events", world.tokens[MASTER_A]).status_code == 200
        _answered(world)
        other = _raw(world, _stream_request(world, world.tokens[MASTER_B], "swarm-b"), stack)
        assert b"200 OK" in _read_until(other, b"\r\n\r\n")
    until(lambda: world.state.quotas.held("streams", digest) == 0, "the closed streams given back")
    with httpx.Client(base_url=world.url, timeout=BOUND) as c:
        headers = {"Authorization": f"Bearer {world.tokens[MASTER_A]}"}
        with c.stream("GET", "/v1/swarms/swarm-a/events?follow=true", headers=headers) as r:
            assert r.status_code == 200


def _upload_head(w: World, new: str, size: int, data: bytes, swarm: str = "swarm-a") -> bytes:
    key = "objects/sha256/" + hashlib.sha256(data).hexdigest()
    query = urlencode(
        {"swarm": swarm, "task_id": "task-1", "task_generation": "1", "namespace": "default", "key": key}
    )
    host = urlparse(w.url).netloc
    return (
        f"PUT /v1/executions/{new}/checkpoint-store/object?{query} HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {w.worker_token(new)}\r\nContent-Type: application/octet-stream\r\n"
        f"Content-Length: {size}\r\n\r\n"
    ).encode()


def test_one_workers_slow_uploads_stop_at_its_share(world: World) -> None:
    _eid, _built, new, _remote = replacement(world)
    share = world.state.quotas.uploads
    digest = sha256_hex(world.worker_token(new))
    data = os.urandom(4096)
    with ExitStack() as stack:
        for _ in range(share):  # each sends a little and then waits
            _raw(world, _upload_head(world, new, 1_000_000, data) + data[:1000], stack)
        until(lambda: world.state.quotas.held("uploads", digest) == share, "every upload in flight")
        with socket.create_connection(_addr(world), timeout=BOUND) as s:
            s.sendall(_upload_head(world, new, len(data), data) + data)
            answer = _read_until(s, b"}")
        assert b" 429 " in answer.split(b"\r\n")[0] and b"too_many_uploads" in answer
        assert b"Retry-After: 5" in answer
        _answered(world)
    until(lambda: world.state.quotas.held("uploads", digest) == 0, "the cut uploads given back")
    until(lambda: world.state.quotas.spooled == 0, "their spool bytes given back")


def _addr(w: World) -> tuple[str, int]:
    u = urlparse(w.url)
    assert u.hostname and u.port
    return u.hostname, u.port


def test_uploads_together_never_spool_past_the_shared_budget(world: World, tmp_path: Path) -> None:
    _eid, _built, new, _remote = replacement(world)
    world.state.quotas.spool_bytes = 300_000
    world.state.quotas.credential_share = world.state.quotas.swarm_share = 1.0  # the whole budget here
    spool = tmp_path / "spool"
    spool.mkdir()
    world.state.spool_dir = str(spool)
    first = os.urandom(200_000)
    second = os.urandom(200_000)
    with ExitStack() as stack:
        _raw(world, _upload_head(world, new, 400_000, first) + first, stack)  # holds 200 kB, waits for more
        until(lambda: world.state.quotas.spooled >= 200_000, "the first upload spooling")
        with socket.create_connection(_addr(world), timeout=BOUND) as s:
            s.sendall(_upload_head(world, new, len(second), second) + second)
            answer = _read_until(s, b"}")
        assert b" 507 " in answer.split(b"\r\n")[0] and b"spool_full" in answer
        assert b"Retry-After: 5" in answer
        assert world.state.quotas.spooled <= 300_000
        _answered(world)
    until(lambda: world.state.quotas.spooled == 0, "the spool given back")
    until(lambda: not any(spool.iterdir()), "no spool file left")
    # With room again the same upload goes through.
    key = "objects/sha256/" + hashlib.sha256(second).hexdigest()
    params = {
        "swarm": "swarm-a",
        "task_id": "task-1",
        "task_generation": "1",
        "namespace": "default",
        "key": key,
    }
    r = world.call(
        "PUT",
        f"/v1/executions/{new}/checkpoint-store/object",
        world.worker_token(new),
        params=params,
        content=second,
    )
    assert r.status_code == 201, r.text


def test_one_workers_uploads_stop_at_its_spool_share_and_another_swarms_worker_is_served(
    world: World,
) -> None:
    """Issue 48: one worker's trickling uploads held 1,019 MiB of the 1 GiB spool and another swarm's
    worker got 507. Now one credential holds at most half the spool (one swarm three quarters):
    past it the same worker is told 429 at once, and the other swarm's worker is served."""
    _eid, _built, new, _remote = replacement(world)
    world.state.quotas.spool_bytes = 400_000  # a credential's share: 200 kB; a swarm's: 300 kB
    digest = sha256_hex(world.worker_token(new))
    held = os.urandom(190_000)
    more = os.urandom(50_000)
    with ExitStack() as stack:
        _raw(world, _upload_head(world, new, 400_000, held) + held, stack)  # holds 190 kB, waits for more
        until(lambda: world.state.quotas.spooled_by("credential", digest) >= 190_000, "the first upload")
        with socket.create_connection(_addr(world), timeout=BOUND) as s:
            s.sendall(_upload_head(world, new, len(more), more) + more)
            answer = _read_until(s, b"}")
        assert b" 429 " in answer.split(b"\r\n")[0] and b"spool_share_full" in answer, answer
        assert b"Retry-After: 5" in answer
        # the other swarm's worker uploads what the spool still has room for
        other = world.first["swarm-b"].execution_id
        with socket.create_connection(_addr(world), timeout=BOUND) as s:
            s.sendall(_upload_head(world, other, len(more), more, swarm="swarm-b") + more)
            answer = _read_until(s, b"}")
        assert b" 201 " in answer.split(b"\r\n")[0], answer
        _answered(world)
    until(lambda: world.state.quotas.spooled == 0, "the spool given back")
    assert world.state.quotas.spooled_by("credential", digest) == 0


def test_an_upload_below_the_floor_rate_is_cut_and_gives_its_spool_back(world: World) -> None:
    """A trickle that never pauses as long as the body timeout still cannot hold its spool share: past
    the grace, an upload that averages less than the floor rate is answered 408 and its bytes freed."""
    _eid, _built, new, _remote = replacement(world)
    world.state.upload_grace, world.state.upload_min_rate = 0.5, 1_000_000.0
    data = os.urandom(100_000)
    with socket.create_connection(_addr(world), timeout=BOUND) as s:
        s.sendall(_upload_head(world, new, len(data), data) + data[:1000])
        until(lambda: world.state.quotas.spooled >= 1000, "the first bytes spooled")
        time.sleep(1.0)  # past the grace: 2,000 bytes in a second is far below the floor
        s.sendall(data[1000:2000])
        answer = _read_until(s, b"}")
    assert b" 408 " in answer.split(b"\r\n")[0] and b"upload_too_slow" in answer, answer
    until(lambda: world.state.quotas.spooled == 0, "the spool given back")


def test_an_upload_sent_fast_then_trickled_is_cut_in_its_next_window(world: World) -> None:
    """The floor is kept per window, not averaged since the start: most of a body sent at once and
    the rest a byte at a time held its spool share until the average fell below the floor (with this
    burst and floor, 100 s: past this test's bound); now the first window without the floor cuts it."""
    _eid, _built, new, _remote = replacement(world)
    world.state.upload_grace, world.state.upload_min_rate = 0.5, 100_000.0
    data = os.urandom(10_000_000)
    with socket.create_connection(_addr(world), timeout=BOUND) as s:
        s.sendall(_upload_head(world, new, len(data), data) + data[:-1000])
        until(lambda: world.state.quotas.spooled >= 9_000_000, "the burst spooled")
        s.settimeout(0.3)
        answer, sent = b"", len(data) - 1000
        deadline = time.monotonic() + BOUND
        while not answer and time.monotonic() < deadline:
            try:
                answer = s.recv(65536)
            except TimeoutError:
                s.send(data[sent : sent + 1])  # a byte every 0.3 s, never a pause the body timeout sees
                sent += 1
        s.settimeout(BOUND)
        answer += _read_until(s, b"}")
    assert b" 408 " in answer.split(b"\r\n")[0] and b"upload_too_slow" in answer, answer
    until(lambda: world.state.quotas.spooled == 0, "the spool given back")


def test_a_rotated_master_credential_ends_its_open_stream(world: World) -> None:
    from agentihooks_operator.api.registry import SwarmRegistry

    secrets = world.registry._secrets  # type: ignore[attr-defined]
    world.registry = world.state.registry = SwarmRegistry(secrets, refresh_seconds=0)
    for swarm, r in world.recoveries.items():
        world.registry.publish(swarm, r, world.specs[swarm], holder="ctl-a")
    with ExitStack() as stack:
        s = _raw(world, _stream_request(world, world.tokens[MASTER_A]), stack)
        assert b"200 OK" in _read_until(s, b"\r\n\r\n")
        secrets.tokens[("default", "master-a")] = "ma-rotated-" + "x" * 24
        world.registry.publish("swarm-a", world.recoveries["swarm-a"], world.specs["swarm-a"], holder="ctl-a")
        ended = _read_until(s, b"credential_revoked")
        assert b"event: end" in ended and b"credential_revoked" in ended
    assert world.call("GET", "/v1/swarms/swarm-a/status", world.tokens[MASTER_A]).status_code == 401


pytestmark = pytest.mark.timeout(180)
