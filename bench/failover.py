"""Benchmark failover: from the status patch that kills a worker Pod to its replacement's create.

The real operator (``agentihooks_operator.main.run`` in its own process, so it
does not share a CPU with the API server) runs against kmock's emulated
Kubernetes API over HTTP and a private redis-server. Every failed attempt held
a native session (written as its heartbeat would) and has a native checkpoint
listed, so recovery goes the whole way without a human: fence, releases,
retire, decision, launch. The clock stops when the replacement Pod's create
request reaches the API server (noted by the emulator as it arrives).

Scenarios: one failure at a time (repeated ``--rounds`` times on one seat),
and ``--seats`` (default 100) simultaneous failures in one swarm. Baseline:
one Pod status patch plus the watch event it produces. The emulator slows down
as objects pile up, so the baseline each scenario is compared with is measured
on the same emulator immediately before that scenario (same object count); the
baseline on the fresh emulator is printed too, for context. Figures are
p50/p99, printed as ratios to the baseline's p50/p99. Not a test: it asserts
nothing. ``--profile`` writes the operator's per-pass timings to its log.

The emulator serves one request at a time, so it cannot show overlapping
Kubernetes calls paying off. ``--core-latency-ms N`` instead runs the recovery
core alone (real Redis, ``Recovery.reconcile``) with an in-memory launcher
whose every call takes N ms, as against an API server that serves requests in
parallel, and prints ``--seats`` failures as a ratio to one failure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import kmock
import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from agentihooks_checkpoint.catalog import CheckpointSummary
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_operator.recovery.keys import SwarmKeys
from testsupport import kubelet as kl
from testsupport.kube import Cluster, emulated_cluster, eventually
from testsupport.kubelet import Kubelet
from testsupport.redis_server import RedisServer

SESSION = "sess-bench"
TAG = "2.1.0"
GEN = "swarm.agentihooks.io/generation"
SEAT = "swarm.agentihooks.io/seat"
EXE = "swarm.agentihooks.io/execution-id"


class TimedEmulator(kmock.KubernetesEmulator):
    """Notes when each Pod create request reaches the server (before it is handled), with its seat."""

    def __init__(self) -> None:
        super().__init__()
        object.__setattr__(self, "created", {})

    async def _handle(self, request: Any) -> Any:
        if request.resource is not None and request.resource.plural == "pods" and request.method == "POST":
            meta = (request.data or {}).get("metadata", {})
            if meta.get("name") and meta.get("annotations", {}).get(SEAT):
                self.created.setdefault(  # type: ignore[attr-defined]
                    meta["name"], (time.perf_counter(), meta["annotations"][SEAT], int(meta["labels"][GEN]))
                )
        return await super()._handle(request)


class NativeCatalog:
    """Lists one complete native checkpoint for whichever attempt is asked about."""

    def list_checkpoints(
        self, scope: StoreScope, *, execution_id: str | None = None
    ) -> list[CheckpointSummary]:
        if execution_id is None:
            return []
        return [
            CheckpointSummary(
                checkpoint_id="ckpt-1",
                checkpoint_sequence=1,
                execution_id=execution_id,
                task_id=scope.task_id,
                task_generation=scope.task_generation,
                execution_generation=1,
                compatibility_key=TAG,
                harness="claude",
                native=True,
                native_session_id=SESSION,
                watermark=10,
                complete=True,
                created_at="2026-11-30T08:00:00Z",
            )
        ]


def spec(seats: int) -> dict[str, Any]:
    return {
        "image": f"ghcr.io/agentihooks/worker:{TAG}",
        "harness": {"name": "claude", "command": ["claude"]},
        "seats": [
            {"name": f"s-{i}", "project": "github.com/acme/app", "task": {"id": f"t-{i}", "text": "x"}}
            for i in range(seats)
        ],
        "recovery": {"automation": True, "passIntervalSeconds": 2},
    }


def note(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


async def baseline(cluster: Cluster, samples: int) -> list[float]:
    """Status patch → its MODIFIED watch event, on a Pod nobody else cares about."""
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", "namespace": "default"}}
    (await cluster.http.post("/api/v1/namespaces/default/pods", json=body)).raise_for_status()
    out: list[float] = []
    async with cluster.http.stream(
        "GET", "/api/v1/namespaces/default/pods?watch=true", timeout=None
    ) as stream:
        lines = stream.aiter_lines()
        for i in range(samples):
            t0 = time.perf_counter()
            r = await cluster.http.patch(
                "/api/v1/namespaces/default/pods/probe/status",
                json={"status": {"message": f"probe-{i}"}},
                headers={"Content-Type": "application/merge-patch+json"},
            )
            r.raise_for_status()
            async for line in lines:
                if not line.strip():
                    continue
                event = json.loads(line)
                obj = event.get("object", {})
                if obj.get("metadata", {}).get("name") == "probe" and obj.get("status", {}).get(
                    "message"
                ) == (f"probe-{i}"):
                    out.append(time.perf_counter() - t0)
                    break
    (await cluster.http.delete("/api/v1/namespaces/default/pods/probe")).raise_for_status()
    return out


async def current(cluster: Cluster, swarm: str, seats: int) -> dict[str, dict[str, Any]]:
    """The newest Pod of each seat, once every seat has one."""

    async def newest() -> dict[str, dict[str, Any]] | None:
        by_seat: dict[str, dict[str, Any]] = {}
        for p in await cluster.pods(swarm):
            seat = p["metadata"]["annotations"][SEAT]
            if seat not in by_seat or int(p["metadata"]["labels"][GEN]) > int(
                by_seat[seat]["metadata"]["labels"][GEN]
            ):
                by_seat[seat] = p
        return by_seat if len(by_seat) == seats else None

    return dict(await eventually(newest, timeout=300, interval=0.5, what=f"{seats} Pods of {swarm}"))


async def make_running(kubelet: Kubelet, redis_url: str, swarm: str, pods: dict[str, Any]) -> None:
    """Start every Pod, and record the native session each attempt holds (what its heartbeat says)."""
    gate = asyncio.Semaphore(8)

    async def start(pod: dict[str, Any]) -> None:
        async with gate:
            await kubelet.set_status(pod["metadata"]["name"], kl.running(), node_name="node-1")

    await asyncio.gather(*(start(p) for p in pods.values()))
    client = redis.Redis.from_url(redis_url)
    beat = json.dumps({"session_id": SESSION, "at_ms": int(time.time() * 1000)})
    key = SwarmKeys("agentihooks", swarm).heartbeats
    client.hset(key, mapping={p["metadata"]["labels"][EXE]: beat for p in pods.values()})
    client.close()


async def fail_all(
    cluster: Cluster, emulator: TimedEmulator, kubelet: Kubelet, swarm: str, pods: dict[str, Any]
) -> list[float]:
    """Kill every Pod in ``pods`` at once; latency of each seat's replacement create."""
    started: dict[str, float] = {}
    old_gen = {seat: int(p["metadata"]["labels"][GEN]) for seat, p in pods.items()}

    async def kill(seat: str, pod: dict[str, Any]) -> None:
        started[seat] = time.perf_counter()
        await kubelet.set_status(pod["metadata"]["name"], kl.oom_killed())

    await asyncio.gather(*(kill(seat, p) for seat, p in pods.items()))

    def replaced() -> dict[str, float] | None:  # in memory: no polling load on the API server
        found = {
            seat: at
            for at, seat, gen in emulator.created.values()  # type: ignore[attr-defined]
            if seat in pods and gen == old_gen[seat] + 1
        }
        return found if len(found) == len(pods) else None

    created = await eventually(replaced, timeout=300, interval=0.02, what="replacements")
    return [created[s] - started[s] for s in pods]


async def run(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="bench-failover-"))
    redis_server = RedisServer(work / "redis")
    redis_server.start()
    emulator = TimedEmulator()
    try:
        async with emulated_cluster(work, emulator) as cluster:
            kubelet = Kubelet(cluster.url, timeout=120)
            await kubelet.put_node("node-1")
            fresh = await baseline(cluster, args.samples)
            fresh_objects = len(list(emulator.objects))
            note("baseline done; starting the operator process")
            env = {
                **os.environ,
                "KUBECONFIG": str(cluster.kubeconfig),
                "AGENTIHOOKS_REDIS_URL": redis_server.url,
                "AGENTIHOOKS_OPERATOR_ID": "op-bench",
                "AGENTIHOOKS_NAMESPACES": "default",
                "AGENTIHOOKS_LEASE_MS": "15000",
                "BENCH_PROFILE": "1" if args.profile else "",
            }
            log = (work / "operator.log").open("wb")
            proc = subprocess.Popen(  # noqa: ASYNC220 - a long-lived child, not awaited
                [sys.executable, __file__, "--serve-operator"], env=env, stdout=log, stderr=log
            )
            try:
                await cluster.create_swarm("one", spec(1))
                pods = await current(cluster, "one", 1)
                base1 = (len(list(emulator.objects)), await baseline(cluster, args.samples))
                single: list[float] = []
                for _ in range(args.rounds):
                    pods = await current(cluster, "one", 1)
                    await make_running(kubelet, redis_server.url, "one", pods)
                    single += await fail_all(cluster, emulator, kubelet, "one", pods)
                note(f"single failures done; launching {args.seats} seats")
                await cluster.create_swarm("many", spec(args.seats))
                pods = await current(cluster, "many", args.seats)
                note("seats launched; making them run")
                await make_running(kubelet, redis_server.url, "many", pods)
                base_many = (len(list(emulator.objects)), await baseline(cluster, args.samples))
                note(f"failing {args.seats} Pods at once")
                many = await fail_all(cluster, emulator, kubelet, "many", pods)
                note("replacements created")
            finally:
                proc.terminate()
                try:
                    await asyncio.to_thread(proc.wait, 30)
                except subprocess.TimeoutExpired:  # still posting Events to the slow emulator
                    proc.kill()
                    await asyncio.to_thread(proc.wait, 30)
                log.close()
            if args.profile:
                note(f"operator log: {work / 'operator.log'}")
            await kubelet.close()
    finally:
        redis_server.stop()

    f50, f99 = pct(fresh, 0.5), pct(fresh, 0.99)
    print(
        f"baseline on the fresh emulator ({fresh_objects} objects): status patch + its watch event, "
        f"{len(fresh)} samples: p50 {f50 * 1e3:.2f} ms, p99 {f99 * 1e3:.2f} ms"
    )
    scenarios = (
        ("1 failure", single, base1),
        (f"{args.seats} simultaneous failures", many, base_many),
    )
    for label, values, (objects, base) in scenarios:
        b50, b99 = pct(base, 0.5), pct(base, 0.99)
        p50, p99 = pct(values, 0.5), pct(values, 0.99)
        print(
            f"{label}: baseline just before it ({objects} objects stored) p50 {b50 * 1e3:.2f} ms, "
            f"p99 {b99 * 1e3:.2f} ms; {len(values)} replacements p50 {p50 * 1e3:.1f} ms = "
            f"{p50 / b50:.1f}x ({p50 / f50:.1f}x fresh), p99 {p99 * 1e3:.1f} ms = {p99 / b99:.1f}x "
            f"({p99 / f99:.1f}x fresh); mean {statistics.mean(values) * 1e3:.1f} ms"
        )


def _time_calls() -> None:
    """Log how long every Kubernetes request and every Redis write script of the operator takes."""
    from agentihooks_operator.k8s.client import KubeClient
    from agentihooks_operator.recovery.writer import Writer

    calls = logging.getLogger("bench.calls")
    kube_call, run_script = KubeClient._call, Writer.run

    def timed_call(self: KubeClient, method: str, path: str, **kw: Any) -> dict[str, Any]:
        t0 = time.perf_counter()
        try:
            return kube_call(self, method, path, **kw)
        finally:
            calls.info(
                "kube %s %s %.1f ms", method, path.split("?", maxsplit=1)[0], (time.perf_counter() - t0) * 1e3
            )

    def timed_run(self: Writer, name: str, payload: dict[str, Any]) -> dict[str, Any]:
        t0 = time.perf_counter()
        try:
            return run_script(self, name, payload)
        finally:
            calls.info("redis %s %.1f ms", name, (time.perf_counter() - t0) * 1e3)

    KubeClient._call = timed_call  # type: ignore[method-assign]
    Writer.run = timed_run  # type: ignore[method-assign]


def serve_operator() -> None:
    """The operator process of the benchmark: the real entry point with the native catalog."""
    from agentihooks_operator.main import run as run_operator

    if os.environ.get("BENCH_PROFILE"):
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(threadName)s %(name)s %(message)s")
        logging.getLogger("agentihooks_operator.k8s.swarmpass").setLevel(logging.DEBUG)
        _time_calls()
    run_operator(standalone=True, catalog=NativeCatalog())


class SlowLauncher:
    """The in-memory launcher, every call taking ``delay`` seconds (an API server that serves in parallel)."""

    def __init__(self, delay: float) -> None:
        from testsupport.recovery import MemoryLauncher

        self.inner, self.delay = MemoryLauncher(), delay

    def launch(self, plan: Any) -> Any:
        time.sleep(self.delay)
        return self.inner.launch(plan)

    def exists(self, execution_id: str) -> bool:
        time.sleep(self.delay)
        return self.inner.exists(execution_id)

    def retire(self, execution_id: str) -> None:
        time.sleep(self.delay)
        self.inner.retire(execution_id)


def core(args: argparse.Namespace) -> None:
    """The recovery core alone: ``Recovery.reconcile`` of 1 and of ``--seats`` failures, real Redis."""
    from agentihooks_operator.recovery import Recovery
    from testsupport.recovery import observe, swarm_spec

    work = Path(tempfile.mkdtemp(prefix="bench-core-"))
    server = RedisServer(work / "redis")
    server.start()
    took: dict[int, float] = {}
    try:
        client = redis.Redis.from_url(server.url)
        for n in (1, args.seats):
            spec = swarm_spec(n, tag=TAG)
            r = Recovery(
                client,
                f"core-{n}",
                holder="bench",
                catalog=NativeCatalog(),
                launcher=SlowLauncher(args.core_latency_ms / 1000),
            )
            plans = r.ensure_seats(spec)
            for plan in plans:
                r.report_session(plan.execution_id, SESSION)
            failed = {p.execution_id: "oom_killed" for p in plans}
            obs = observe([(p.execution_id, p.seat, 1) for p in plans], failed=failed)
            t0 = time.perf_counter()
            report = r.reconcile(spec, obs)
            took[n] = time.perf_counter() - t0
            if len(report.launches) != n:
                raise SystemExit(f"the core launched {len(report.launches)} of {n} replacements")
        client.close()
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"recovery core, every launcher call {args.core_latency_ms:.0f} ms: "
        f"1 failure {took[1] * 1e3:.0f} ms; "
        f"{args.seats} failures {took[args.seats] * 1e3:.0f} ms = {took[args.seats] / took[1]:.1f}x one"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seats", type=int, default=100, help="simultaneous failures (default 100)")
    parser.add_argument("--rounds", type=int, default=10, help="single-failure repetitions (default 10)")
    parser.add_argument("--samples", type=int, default=100, help="baseline samples (default 100)")
    parser.add_argument("--profile", action="store_true", help="per-pass timings in the operator log")
    parser.add_argument(
        "--core-latency-ms",
        type=float,
        default=None,
        help="instead: the recovery core alone with a launcher whose calls take this long",
    )
    parser.add_argument("--serve-operator", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_operator:
        serve_operator()
        return
    if args.core_latency_ms is not None:
        core(args)
        return
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
