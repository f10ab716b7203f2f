"""Benchmark failover: from the status patch that kills a worker Pod to its replacement's create.

The real operator (kopf, in its own thread) runs against kmock's emulated
Kubernetes API over HTTP and a private redis-server. Every failed attempt held
a native session and has a native checkpoint listed, so recovery goes the
whole way without a human: fence, releases, retire, decision, launch. The
clock stops when the replacement Pod's create request reaches the API server.

Scenarios: one failure at a time (repeated ``--rounds`` times on one seat),
and ``--seats`` (default 100) simultaneous failures in one swarm. Baseline,
measured on the same emulator in the same run: one Pod status patch plus the
watch event it produces. Figures are p50/p99, printed as ratios to the
baseline's p50/p99. Not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import kmock

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from agentihooks_checkpoint.catalog import CheckpointSummary
from agentihooks_checkpoint.scope import StoreScope
from testsupport import kubelet as kl
from testsupport.kube import Cluster, emulated_cluster, eventually, running_operator
from testsupport.kubelet import Kubelet
from testsupport.redis_server import RedisServer

SESSION = "sess-bench"
TAG = "2.1.0"
GEN = "swarm.agentihooks.io/generation"
SEAT = "swarm.agentihooks.io/seat"


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

    return dict(await eventually(newest, timeout=120, what=f"{seats} Pods of {swarm}"))


async def make_running(
    cluster: Cluster, kubelet: Kubelet, memo: Any, swarm: str, pods: dict[str, Any]
) -> None:
    runner = await eventually(lambda: memo["passes"].get(("default", swarm)), what="swarm pass")
    await asyncio.gather(
        *(kubelet.set_status(p["metadata"]["name"], kl.running(), node_name="node-1") for p in pods.values())
    )
    for p in pods.values():
        eid = p["metadata"]["labels"]["swarm.agentihooks.io/execution-id"]
        await asyncio.to_thread(runner.recovery.report_session, eid, SESSION)


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
            kubelet = Kubelet(cluster.url)
            await kubelet.put_node("node-1")
            base = await baseline(cluster, args.samples)
            objects_before = len(list(emulator.objects))
            async with running_operator(
                cluster, redis_server.url, catalog=NativeCatalog(), lease_ms=15000
            ) as memo:
                await cluster.create_swarm("one", spec(1))
                single: list[float] = []
                for _ in range(args.rounds):
                    pods = await current(cluster, "one", 1)
                    await make_running(cluster, kubelet, memo, "one", pods)
                    single += await fail_all(cluster, emulator, kubelet, "one", pods)
                await cluster.create_swarm("many", spec(args.seats))
                pods = await current(cluster, "many", args.seats)
                await make_running(cluster, kubelet, memo, "many", pods)
                many = await fail_all(cluster, emulator, kubelet, "many", pods)
            objects_after = len(list(emulator.objects))
            loaded = await baseline(cluster, args.samples)
            await kubelet.close()
    finally:
        redis_server.stop()

    b50, b99 = pct(base, 0.5), pct(base, 0.99)
    l50, l99 = pct(loaded, 0.5), pct(loaded, 0.99)
    print(
        f"baseline: status patch + its watch event, {len(base)} samples on the fresh emulator "
        f"({objects_before} objects): p50 {b50 * 1e3:.2f} ms, p99 {b99 * 1e3:.2f} ms"
    )
    print(
        f"baseline again after the runs ({objects_after} objects stored): "
        f"p50 {l50 * 1e3:.2f} ms, p99 {l99 * 1e3:.2f} ms"
    )
    for label, values in (("1 failure", single), (f"{args.seats} simultaneous failures", many)):
        p50, p99 = pct(values, 0.5), pct(values, 0.99)
        print(
            f"{label} ({len(values)} replacements): p50 {p50 * 1e3:.1f} ms = {p50 / b50:.1f}x baseline p50 "
            f"({p50 / l50:.1f}x loaded); p99 {p99 * 1e3:.1f} ms = {p99 / b99:.1f}x baseline p99 "
            f"({p99 / l99:.1f}x loaded); mean {statistics.mean(values) * 1e3:.1f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seats", type=int, default=100, help="simultaneous failures (default 100)")
    parser.add_argument("--rounds", type=int, default=20, help="single-failure repetitions (default 20)")
    parser.add_argument("--samples", type=int, default=200, help="baseline samples (default 200)")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
