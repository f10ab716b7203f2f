"""Benchmark seat admission: Redis time and round trips of admitting generation 1, against a bare write.

For each swarm size (default 1,000 and 10,000 seats; ``--quick``: 1,000 only)
it starts a private redis-server (AOF on, fsync every second) and times
``Recovery.ensure_seats`` on a swarm with no attempt yet, in the production
configuration (the operator's :class:`RedisClock`, the default 15 s lease, the
default batch), with a launcher that does nothing, so only the Redis side is
measured: a launch on Kubernetes is the API server's time, not admission's.
Each repetition is a new swarm on the same server.

Printed per size: the admission's time (median of ``--repeat``), its round
trips counted at the connection, the time Redis itself spent in the scripts
(``INFO commandstats``), whether it fits in one lease TTL and how much of it
it uses, and the ratio to the baseline: one pipelined ``HSET`` of as many
records of the same size as an attempt record, on the same server, in the same
run. With ``--unbatched`` (1,000 seats at most) it also admits one seat per
script (``batch=1``), the shape admission had before issue 18.

Not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Literal

import redis
from agentihooks_operator.recovery import LaunchPlan, Recovery
from agentihooks_operator.recovery.steps.seats import BATCH
from agentihooks_operator.recovery.store.clock import RedisClock
from agentihooks_operator.swarm import SwarmSpec

sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))
from redisproc import private_redis

LEASE_MS = 15000


class CountingConnection(redis.Connection):
    """One per command or pipeline sent (a new connection's handshake is not counted)."""

    sent = 0

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        CountingConnection.sent += 1
        super().send_packed_command(command, check_health)


class NoLauncher:
    """Launches nothing (records the plan): the benchmark measures Redis admission only."""

    def __init__(self) -> None:
        self.pods: set[str] = set()

    def launch(self, plan: LaunchPlan) -> Literal["created", "exists"]:
        self.pods.add(plan.execution_id)
        return "created"

    def exists(self, execution_id: str) -> bool:
        return execution_id in self.pods

    def retire(self, execution_id: str) -> None:
        self.pods.discard(execution_id)


class NoCatalog:
    def list_checkpoints(self, scope: Any, *, execution_id: str | None = None) -> list[Any]:
        return []


def spec_of(n: int) -> SwarmSpec:
    return SwarmSpec.model_validate(
        {
            "image": "registry.example/worker:v1",
            "harness": {"name": "claude", "command": ["claude"]},
            "seats": [
                {"name": f"s-{i}", "project": "local:bench", "task": {"id": f"t-{i}", "text": f"task {i}"}}
                for i in range(n)
            ],
        }
    )


def script_usec(client: redis.Redis) -> int:
    """Microseconds Redis spent in EVAL/EVALSHA so far (its own accounting, not the client's)."""
    stats = client.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("usec", 0)) for c in ("evalsha", "eval"))


def baseline(client: redis.Redis, n: int, record_bytes: int, repeat: int) -> float:
    """Median time of one pipelined HSET of ``n`` records of ``record_bytes`` each."""
    value = "x" * record_bytes
    times = []
    for r in range(repeat):
        t = time.perf_counter()
        pipe = client.pipeline(transaction=False)
        for i in range(n):
            pipe.hset(f"bench:baseline:{r}", f"s-{i}", value)
        pipe.execute()
        times.append(time.perf_counter() - t)
        client.delete(f"bench:baseline:{r}")
    return statistics.median(times)


def admit(client: redis.Redis, name: str, spec: SwarmSpec, batch: int) -> tuple[float, int, int]:
    """(seconds, round trips, Redis script microseconds) of one admission of a new swarm."""
    r = Recovery(
        client, name, holder="bench", catalog=NoCatalog(), launcher=NoLauncher(), clock=RedisClock(client)
    )
    r.acquire()
    r.load_scripts()  # as a warm operator has them
    usec, sent = script_usec(client), CountingConnection.sent
    t = time.perf_counter()
    plans = r.ensure_seats(spec, batch=batch)
    took = time.perf_counter() - t
    trips = CountingConnection.sent - sent
    if len(plans) != len(spec.seats):
        raise SystemExit(f"admitted {len(plans)} of {len(spec.seats)} seats: the benchmark is wrong")
    return took, trips, script_usec(client) - usec


def run_size(n: int, args: argparse.Namespace) -> None:
    spec = spec_of(n)
    with private_redis("bench-admission-") as port:
        pool = redis.ConnectionPool(host="127.0.0.1", port=port, connection_class=CountingConnection)
        client = redis.Redis(connection_pool=pool)
        runs = [admit(client, f"bench-{n}-{i}", spec, args.batch) for i in range(args.repeat)]
        key = f"agentihooks:swarm:{{bench-{n}-0}}:attempt-records"
        sample = client.hrandfield(key)
        record_bytes = len(client.hget(key, sample) or b"") if sample else 400
        base = baseline(client, n, record_bytes, args.repeat)
        took = statistics.median(t for t, _, _ in runs)
        trips = statistics.median(t for _, t, _ in runs)
        busy = statistics.median(u for _, _, u in runs) / 1e6
        batches = -(-n // args.batch)
        fits = "yes" if took < LEASE_MS / 1000 else "NO"
        print(
            f"\n== {n:,} seats, batches of {args.batch} ({batches}), median of {args.repeat} "
            f"(range {min(t for t, _, _ in runs):.2f}-{max(t for t, _, _ in runs):.2f} s)"
        )
        print(
            f"admission   : {took:.2f} s, {trips:.0f} round trips, Redis busy in the scripts {busy:.2f} s; "
            f"within one lease TTL ({LEASE_MS // 1000} s): {fits}, {took / (LEASE_MS / 1000):.0%} of it"
        )
        print(
            f"baseline    : one pipelined HSET of {n:,} records of {record_bytes} bytes: "
            f"{base * 1000:.1f} ms; admission = {took / base:.1f}x"
        )
        if args.unbatched and n <= 1000:
            one = [admit(client, f"bench-{n}-one-{i}", spec, 1) for i in range(args.repeat)]
            t1 = statistics.median(t for t, _, _ in one)
            print(
                f"batch=1     : {t1:.2f} s, {statistics.median(t for _, t, _ in one):.0f} round trips "
                f"= {t1 / base:.1f}x the baseline, {t1 / took:.1f}x the batched admission"
            )
        client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 seats only")
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated swarm sizes")
    parser.add_argument("--batch", type=int, default=BATCH, help=f"seats per admission script ({BATCH})")
    parser.add_argument("--repeat", type=int, default=3, help="admissions (new swarms) per size")
    parser.add_argument(
        "--unbatched", action=argparse.BooleanOptionalAction, default=True, help="also batch=1, up to 1,000"
    )
    args = parser.parse_args()
    sizes = [int(v) for v in args.sizes.split(",") if v.strip()]
    if args.batch < 1 or args.repeat < 1 or not sizes or any(v < 1 for v in sizes):
        parser.error("--batch, --repeat and every size must be positive")
    for n in [1000] if args.quick else sizes:
        run_size(n, args)


if __name__ == "__main__":
    main()
