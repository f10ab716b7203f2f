"""Benchmark the recovery core on each Redis engine: one server, a Redis Cluster, Sentinel with WAIT.

Engines, all started for this run on loopback from the same ``redis-server``
binary, AOF off everywhere so they differ only in topology (the test suite's
``tests/testsupport`` processes):

* ``one server``: ``redis://``, the baseline;
* ``cluster``: three primaries (``redis+cluster://``); the swarm's keys sit in
  one slot, so every script and pipeline goes to one primary;
* ``sentinel+WAIT 1``: a primary with two replicas under one Sentinel
  (``redis+sentinel://``), every guarded write followed by ``WAIT 1`` in its
  round trip (``AGENTIHOOKS_REDIS_WAIT_REPLICAS=1``).

Workload: ``Recovery.reconcile`` of ``--failures`` simultaneous failures
(default 100) in a swarm of that many seats, each with a native session and a
listed native checkpoint, so every failure goes the whole way (fence,
releases, decision, launch) against an in-memory launcher; ``--rounds``
rounds (default 5), each in a fresh swarm, engines interleaved within a round,
after one uncounted warm-up pass per engine.
Printed: p50 and max per engine, and each engine's p50 as a ratio to the one
server's p50 of the same run. Not a test: it asserts only that every failure
was replaced.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))

import realplane
from agentihooks_operator.recovery import Recovery
from agentihooks_operator.recovery.store.durable import Durability
from agentihooks_operator.redisconn import connect
from realplane import SESSION, TAG, NativeCatalog
from testsupport.recovery import MemoryLauncher, observe, swarm_spec
from testsupport.redis_cluster import RedisClusterProcesses
from testsupport.redis_sentinel import RedisSentinelProcesses
from testsupport.redis_server import RedisServer


def one_pass(client: object, swarm: str, failures: int) -> float:
    """Seconds of one reconcile that fences and replaces ``failures`` attempts."""
    spec = swarm_spec(failures, tag=TAG)
    launcher = MemoryLauncher()
    r = Recovery(client, swarm, holder="bench", catalog=NativeCatalog(), launcher=launcher)  # type: ignore[arg-type]
    plans = r.ensure_seats(spec)
    for plan in plans:
        r.report_session(plan.execution_id, SESSION)
    r.load_scripts()
    obs = observe(
        [(p.execution_id, p.seat, 1) for p in plans], failed={p.execution_id: "oom_killed" for p in plans}
    )
    t0 = time.perf_counter()
    report = r.reconcile(spec, obs)
    took = time.perf_counter() - t0
    if len(report.launches) != failures:
        raise SystemExit(f"{swarm}: {len(report.launches)} of {failures} failures replaced")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--failures", type=int, default=100, help="simultaneous failures per pass")
    parser.add_argument("--rounds", type=int, default=5, help="passes per engine")
    args = parser.parse_args()
    if args.failures < 1 or args.rounds < 1:
        parser.error("--failures and --rounds must be at least 1")
    work = Path(tempfile.mkdtemp(prefix="bench-engines-"))
    single = RedisServer(work / "single", appendonly=False)
    cluster = RedisClusterProcesses(work / "cluster")
    sentinel = RedisSentinelProcesses(work / "sentinel", sentinels=1)
    try:
        single.start()
        cluster.start()
        sentinel.start()
        engines: dict[str, Callable[[], object]] = {
            "one server": lambda: connect(single.url),
            "cluster": lambda: connect(cluster.url),
            "sentinel+WAIT 1": lambda: connect(sentinel.url, durability=Durability(1, 2000)),
        }
        clients = {name: make() for name, make in engines.items()}
        took: dict[str, list[float]] = {name: [] for name in engines}
        for client in clients.values():  # warm-up pass, not counted (connections, scripts)
            one_pass(client, "bench-warm", args.failures)
        for i in range(args.rounds):
            for name, client in clients.items():
                took[name].append(one_pass(client, f"bench-{i}", args.failures))
        base = statistics.median(took["one server"])
        print(
            f"recovery core, {args.failures} simultaneous failures per pass, {args.rounds} passes per engine"
        )
        for name, samples in took.items():
            p50 = statistics.median(samples)
            worst = max(samples) * 1e3
            print(f"  {name:16} p50 {p50 * 1e3:7.1f} ms  max {worst:7.1f} ms  = {p50 / base:.2f}x one server")
    finally:
        sentinel.stop()
        cluster.stop()
        single.stop()
        realplane.remove(work)


if __name__ == "__main__":
    main()
