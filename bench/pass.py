"""Benchmark one recovery pass: Redis round trips and time, as a ratio to a bare pipelined read.

For each swarm size (1,000 and 10,000 seats; ``--quick``: 1,000 only) it
starts a private redis-server (AOF on, fsync every second), admits every seat,
then measures:

* a pass over all attempts healthy;
* a pass where 1 % of the attempts failed, then one where 10 % failed (each
  failed attempt held a native session and has a native checkpoint, so it goes
  the whole way: fence, two releases, retire, decision, replacement launch).

Round trips are counted at the connection (one per command or pipeline sent),
independently of the core's own bookkeeping. The baseline is one pipelined read
of the same keys the pass reads (the snapshot hashes, plus the failed
attempts' fields), timed in the same run. Not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from typing import Any, Literal

import redis
from agentihooks_checkpoint.catalog import CheckpointSummary
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_operator.recovery import AttemptObservation, LaunchPlan, Recovery
from agentihooks_operator.swarm import SwarmSpec

TAG = "v1"


class CountingConnection(redis.Connection):
    """Counts every packed send: one command or one whole pipeline is one round trip.

    A new connection's handshake (``CLIENT SETINFO`` and the like) is counted apart, in
    ``handshakes``: it is paid once per pooled connection, not once per pass. The concurrent pass
    opens up to its pool width of connections the first time many attempts fail together.
    """

    sent = 0
    handshakes = 0
    opened = 0
    _in_handshake = False

    def on_connect_check_health(self, *args: Any, **kwargs: Any) -> None:
        CountingConnection.opened += 1
        self._in_handshake = True
        try:
            super().on_connect_check_health(*args, **kwargs)
        finally:
            self._in_handshake = False

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if self._in_handshake:
            CountingConnection.handshakes += 1
        else:
            CountingConnection.sent += 1
        super().send_packed_command(command, check_health)


class Launcher:
    def __init__(self) -> None:
        self.pods: set[str] = set()

    def launch(self, plan: LaunchPlan) -> Literal["created", "exists"]:
        if plan.execution_id in self.pods:
            return "exists"
        self.pods.add(plan.execution_id)
        return "created"

    def exists(self, execution_id: str) -> bool:
        return execution_id in self.pods

    def retire(self, execution_id: str) -> None:
        self.pods.discard(execution_id)


class Catalog:
    """One native checkpoint per attempt that asked for one (in memory: this measures Redis)."""

    def __init__(self) -> None:
        self.by_execution: dict[str, CheckpointSummary] = {}

    def add(self, execution_id: str, task_id: str) -> None:
        self.by_execution[execution_id] = CheckpointSummary(
            checkpoint_id="ckpt-1",
            checkpoint_sequence=1,
            execution_id=execution_id,
            task_id=task_id,
            task_generation=1,
            execution_generation=1,
            compatibility_key=TAG,
            harness="claude",
            native=True,
            native_session_id="sess-1",
            watermark=100,
            complete=True,
            created_at="2026-11-30T08:00:00Z",
        )

    def list_checkpoints(
        self, scope: StoreScope, *, execution_id: str | None = None
    ) -> list[CheckpointSummary]:
        found = self.by_execution.get(execution_id or "")
        return [found] if found else []


def start_redis(workdir: str) -> tuple[subprocess.Popen[bytes], int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    binary = shutil.which("redis-server") or "redis-server"
    proc = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            workdir,
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--loglevel",
            "warning",
        ],
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            redis.Redis(port=port).ping()
            return proc, port
        except redis.ConnectionError:
            time.sleep(0.05)
    raise RuntimeError("redis-server did not start")


def spec_of(n: int) -> SwarmSpec:
    return SwarmSpec.model_validate(
        {
            "image": f"registry.example/worker:{TAG}",
            "harness": {"name": "claude", "command": ["claude"]},
            "seats": [
                {"name": f"s-{i}", "project": "local:bench", "task": {"id": f"t-{i}", "text": f"task {i}"}}
                for i in range(n)
            ],
        }
    )


def baseline(client: redis.Redis, r: Recovery, failed: list[str], repeat: int) -> float:
    """Median time of one pipelined read of the keys the pass reads."""
    k = r.keys
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        pipe = client.pipeline(transaction=False)
        pipe.hgetall(k.seats)
        pipe.hgetall(k.recovery_work)
        pipe.exists(k.recovery_paused)
        pipe.hgetall(k.recovery_requests)
        if failed:
            for part in (
                k.attempt_records,
                k.attempt_fences,
                k.attempt_recoveries,
                k.heartbeats,
                k.restore_outcomes,
                k.attempt_journal,
            ):
                pipe.hmget(part, failed)
        pipe.execute()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def run_size(n: int, repeat: int) -> None:
    work = tempfile.mkdtemp(prefix="bench-pass-")
    proc, port = start_redis(work)
    try:
        pool = redis.ConnectionPool(host="127.0.0.1", port=port, connection_class=CountingConnection)
        client = redis.Redis(connection_pool=pool)
        catalog, launcher = Catalog(), Launcher()
        r = Recovery(client, f"bench-{n}", holder="bench", catalog=catalog, launcher=launcher)
        r.load_scripts()
        spec = spec_of(n)
        t = time.perf_counter()
        plans = r.ensure_seats(spec)
        print(f"\n== {n} attempts (admitted in {time.perf_counter() - t:.1f} s)")
        current = {p.seat: (p.execution_id, p.generation, p.task_id) for p in plans}

        def observations(failed: set[str]) -> list[AttemptObservation]:
            return [
                AttemptObservation(
                    execution_id=e,
                    seat=s,
                    generation=g,
                    state="failed" if e in failed else "running",
                    reason="oom_killed" if e in failed else None,
                )
                for s, (e, g, _) in current.items()
            ]

        healthy = observations(set())
        trips, times = [], []
        for _ in range(repeat):
            before = CountingConnection.sent
            t = time.perf_counter()
            r.reconcile(spec, healthy)
            times.append(time.perf_counter() - t)
            trips.append(CountingConnection.sent - before)
        base = baseline(client, r, [], repeat)
        print(
            f"healthy     : {statistics.median(trips):.0f} round trips/pass; "
            f"pass {statistics.median(times) * 1000:.1f} ms = {statistics.median(times) / base:.1f}x "
            f"one pipelined read ({base * 1000:.2f} ms)"
        )
        healthy_trips = statistics.median(trips)
        seats = list(current)
        offset = 0
        for share in (0.01, 0.10):
            k = max(1, int(n * share))
            chosen = seats[offset : offset + k]
            offset += k
            failed = {current[s][0] for s in chosen}
            for s in chosen:
                eid, _, task = current[s]
                r.report_session(eid, "sess-1")
                catalog.add(eid, task)
            obs = observations(failed)
            base = baseline(client, r, sorted(failed), repeat)
            before = CountingConnection.sent
            opened_before = CountingConnection.opened
            shakes_before = CountingConnection.handshakes
            t = time.perf_counter()
            report = r.reconcile(spec, obs)
            elapsed = time.perf_counter() - t
            sent = CountingConnection.sent - before
            opened = CountingConnection.opened - opened_before
            shakes = CountingConnection.handshakes - shakes_before
            per_failed = (sent - healthy_trips) / k
            print(
                f"{share:>4.0%} failed ({k:>4}): {sent} round trips/pass = {healthy_trips:.0f} + "
                f"{per_failed:.2f} per failed attempt (plus {opened} pooled connections opened, "
                f"{shakes} handshake commands); fenced {len(report.fenced)}, "
                f"launched {len(report.launches)}; pass {elapsed * 1000:.0f} ms = {elapsed / base:.0f}x "
                f"one pipelined read of the same keys ({base * 1000:.2f} ms)"
            )
            for d in report.decisions:
                s = next(x for x in chosen if current[x][0] == d.execution_id)
                current[s] = (d.replacement or "", current[s][1] + 1, current[s][2])
        client.close()
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 attempts only")
    parser.add_argument(
        "--repeat", type=int, default=5, help="healthy passes and baseline reads to take the median of"
    )
    args = parser.parse_args()
    for n in (1000,) if args.quick else (1000, 10000):
        run_size(n, args.repeat)


if __name__ == "__main__":
    main()
