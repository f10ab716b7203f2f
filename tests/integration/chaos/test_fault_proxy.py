"""The campaign's TCP fault proxy on real parts: a real toxiproxy-server, real iptables redirects, a real
redis-server and client processes under group ids of their own. Only the chosen group's connections go
through the proxy; a cut holds them (a partition, not a refusal) until healed; latency delays them by at
least what was asked; the chains of a run that is gone are swept."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from testsupport import faultproxy
from testsupport.faultproxy import CHAIN_PREFIX, FaultProxy, Redirects, sweep_chains
from testsupport.processes import owned_run
from testsupport.redis_server import RedisServer

pytestmark = pytest.mark.skipif(
    faultproxy.unavailable() is not None, reason=f"fault proxy: {faultproxy.unavailable()}"
)
GID = 61001

#: One PING from a client process: prints ``ok <seconds>`` or ``timeout <seconds>``.
PING = """
import sys, time, redis
c = redis.Redis(port=int(sys.argv[1]), socket_timeout=float(sys.argv[2]), socket_connect_timeout=2)
t = time.monotonic()
try:
    c.ping()
    print("ok", time.monotonic() - t)
except redis.exceptions.TimeoutError:
    print("timeout", time.monotonic() - t)
"""


def _ping(port: int, *, gid: int | None, timeout: float = 1.0) -> tuple[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", PING, str(port), str(timeout)],
        capture_output=True,
        text=True,
        check=True,
        group=gid,
        timeout=30,
    )
    what, took = done.stdout.split()
    return what, float(took)


@pytest.fixture
def wired(tmp_path: Path):  # type: ignore[no-untyped-def]
    server = RedisServer(tmp_path / "redis")
    server.start()
    with owned_run():
        proxy, redirects = FaultProxy(tmp_path / "logs"), Redirects()
        proxy.start()
        redirects.start()
        try:
            to = proxy.add("client-redis", server.port)
            redirects.route(GID, server.port, to)
            yield proxy, redirects, server
        finally:
            redirects.stop()
            proxy.stop()
            server.stop()


def test_a_cut_holds_only_the_chosen_group_until_healed(wired) -> None:  # type: ignore[no-untyped-def]
    proxy, _, server = wired
    assert _ping(server.port, gid=GID)[0] == "ok"  # through the proxy, nothing in the way
    proxy.cut("client-redis")
    assert _ping(server.port, gid=GID)[0] == "timeout"  # connected, then nothing answers
    assert _ping(server.port, gid=None)[0] == "ok"  # another process (group 0) goes straight there
    proxy.heal("client-redis")
    assert _ping(server.port, gid=GID)[0] == "ok"


def test_latency_delays_each_round_trip_by_at_least_what_was_asked(wired) -> None:  # type: ignore[no-untyped-def]
    proxy, _, server = wired
    proxy.latency("client-redis", 400)
    what, took = _ping(server.port, gid=GID, timeout=10)
    assert what == "ok" and took >= 0.4  # a lower bound: the proxy held the bytes at least that long
    proxy.heal_all()
    assert proxy.toxics["client-redis"] == set()


def test_stop_removes_the_chain_and_a_gone_runs_chain_is_swept(tmp_path: Path) -> None:
    redirects = Redirects()
    redirects.start()
    listed = subprocess.run(["iptables", "-w", "-t", "nat", "-S"], capture_output=True, text=True).stdout
    assert f"-N {redirects.chain}" in listed and f"-A OUTPUT -j {redirects.chain}" in listed
    redirects.stop()
    listed = subprocess.run(["iptables", "-w", "-t", "nat", "-S"], capture_output=True, text=True).stdout
    assert redirects.chain not in listed

    # A run that was SIGKILLed: its chain (named after a pid that is gone) is left behind.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = f"{CHAIN_PREFIX}{dead.pid}-1"
    subprocess.run(["iptables", "-w", "-t", "nat", "-N", stale], check=True)
    subprocess.run(["iptables", "-w", "-t", "nat", "-A", "OUTPUT", "-j", stale], check=True)
    live = Redirects()
    live.start()  # sweeps first
    try:
        listed = subprocess.run(["iptables", "-w", "-t", "nat", "-S"], capture_output=True, text=True).stdout
        assert stale not in listed and live.chain in listed
        assert sweep_chains() == []  # the live run's chain is its own: kept
    finally:
        live.stop()
