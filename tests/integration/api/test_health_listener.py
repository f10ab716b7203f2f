"""The probes' own listener (api/health.py) answers however the API's clients use the API's port.

A control API with a cap of four connections has all four held by a client that never finishes
its request heads, with the API's eviction of such heads turned off (``head_grace`` past the header
timeout: a flood the API port cannot shed); a fifth caller waits in the listen queue unanswered.
Through all of it the probes' listener answers ``/healthz`` and ``/readyz`` every time, and it
tells the truth: once Redis stops answering, ``/readyz`` is 503 while ``/healthz`` stays 200; once
kopf stops, both are. Nothing else is served there. No timing is asserted: each answer gets a generous bound.
"""

from __future__ import annotations

import socket
import threading
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from agentihooks_operator.api.health import start_health_listener
from agentihooks_operator.api.limits import ServerLimits
from agentihooks_operator.api.server import ControlServer
from agentihooks_operator.api.state import ApiState
from testsupport.control_api import make_world, served_in_thread
from testsupport.redis_server import RedisServer

CAP = 4
BOUND = 30.0


def health_listener(state: ApiState) -> AbstractContextManager[ControlServer]:
    return served_in_thread(lambda: start_health_listener(state, "127.0.0.1", 0), name="health")


def held(url: str) -> socket.socket:
    """A connection that sent half a request line and nothing more (the server keeps its slot)."""
    u = httpx.URL(url)
    assert u.host and u.port
    s = socket.create_connection((u.host, u.port), timeout=BOUND)
    s.sendall(b"GET /v1/swarms HTTP/1.1\r\nHost: x\r\n")
    return s


def probe(url: str, path: str) -> httpx.Response:
    return httpx.get(url + path, timeout=BOUND)


def test_the_probes_are_answered_while_every_api_connection_is_held(redis_url: str, tmp_path: Path) -> None:
    limits = ServerLimits(header_timeout=600.0, max_connections=CAP, backlog=8, head_grace=1200.0)
    with (
        make_world(redis_url, tmp_path, limits) as w,
        health_listener(w.state) as health,
        ExitStack() as held_all,
    ):
        for _ in range(CAP):
            held_all.enter_context(held(w.url))
        for _ in range(200):  # every slot is taken once the server accepted all four
            if w.server.open_connections == CAP:
                break
            threading.Event().wait(0.05)
        assert w.server.open_connections == CAP
        with pytest.raises(httpx.TimeoutException):  # the API port is starved (the point of the test)
            httpx.get(w.url + "/healthz", timeout=2.0)
        for _ in range(20):
            alive, ready = probe(health.url, "/healthz"), probe(health.url, "/readyz")
            assert alive.status_code == 200 and alive.json() == {"status": "ok", "kopf": True}
            assert ready.status_code == 200 and ready.json()["redis"] is True
        assert w.server.open_connections == CAP  # and the held ones are still held


def test_the_probes_listener_tells_redis_and_kopf_apart_and_serves_nothing_else(
    private_redis: RedisServer, tmp_path: Path
) -> None:
    stopping = {"now": False}
    with make_world(private_redis.url, tmp_path) as w:
        w.state.kopf_ready = lambda: not stopping["now"]
        with health_listener(w.state) as health:
            assert probe(health.url, "/readyz").status_code == 200
            for path in ("/v1/swarms", "/metrics", "/openapi.json", "/ledger"):
                assert probe(health.url, path).status_code == 404, path
            assert httpx.post(health.url + "/healthz", timeout=BOUND).status_code == 405
            private_redis.stop()
            ready = probe(health.url, "/readyz")
            assert ready.status_code == 503 and ready.json() == {
                "status": "not ready",
                "kopf": True,
                "redis": False,
            }
            assert probe(health.url, "/healthz").status_code == 200  # Redis is not liveness
            stopping["now"] = True
            assert probe(health.url, "/healthz").status_code == 503
            assert probe(health.url, "/readyz").json()["kopf"] is False


def test_redis_that_hangs_makes_readiness_fail_in_bounded_time(
    private_redis: RedisServer, tmp_path: Path
) -> None:
    """A frozen Redis (SIGSTOP) is not ready; the probe is answered, it does not wait on Redis."""
    import os
    import signal

    with make_world(private_redis.url, tmp_path) as w:
        assert private_redis.proc is not None
        frozen: Any = redis.Redis.from_url(private_redis.url, socket_timeout=60)
        w.state.redis = frozen
        with health_listener(w.state) as health:
            assert probe(health.url, "/readyz").status_code == 200
            os.kill(private_redis.proc.pid, signal.SIGSTOP)
            try:
                for _ in range(3):
                    assert probe(health.url, "/readyz").status_code == 503
                assert probe(health.url, "/healthz").status_code == 200
            finally:
                os.kill(private_redis.proc.pid, signal.SIGCONT)
            frozen.close()
