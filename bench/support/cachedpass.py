"""The operator's healthy pass with the watch-fed Pod cache, by swarm size (bench/pass.py's section).

A healthy pass should cost O(changed Pods), not O(seats). For each size
(``--cache-sizes``, default 100, 1,000 and 5,000 seats) this runs the
operator's own ``SwarmPass`` against a private redis-server and an in-memory
Kubernetes API (every seat's Pod Running on a Ready Node; calls counted, not
timed: the API's cost is measured on the real control plane in the section
after this one), and prints the median of:

* a quiet pass: nothing changed since the last one (the cache answers);
* a pass after one Pod changed (a watch event);
* a full pass: the cache invalidated first (what the first pass, a new lease
  epoch, a restarted watch and the 60 s resync cost);

each beside the baseline measured in the same run: one pipelined Redis read of
the swarm's snapshot hashes (what a pass read before the seats map had a
version). The seat check (``ensure_seats``) and the recovery core's snapshot
are timed alone: both now read the seats map's version, not the map
(:mod:`agentihooks_operator.recovery.store.seatsmap`). The section ends with each
size's quiet pass over the smallest size's, all sizes set up side by side and
their quiet passes taken in turn (:func:`interleaved_quiet`): a quiet pass should
cost the same at 50,000 seats as at 100.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import redis
from agentihooks_checkpoint.catalog import EmptyCatalog
from agentihooks_operator.k8s.building.pods import OWNER_LABEL, Owner, label, owner_value, pod_name
from agentihooks_operator.k8s.observing.podcache import PodCache
from agentihooks_operator.k8s.swarmpass import SwarmPass
from agentihooks_operator.recovery import Recovery
from agentihooks_operator.recovery.store.clock import RedisClock
from agentihooks_operator.recovery.store.reads import snapshot
from agentihooks_operator.swarm import SwarmSpec

NODE = "bench-node"


class MemoryKube:
    """The few calls a pass makes, answered from memory and counted."""

    def __init__(self, swarm: str) -> None:
        self.swarm = swarm
        self.pods: dict[str, dict[str, Any]] = {}
        self.calls = 0
        ready = {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-30T10:00:00Z"}
        self.nodes = [{"metadata": {"name": NODE}, "status": {"conditions": [ready]}}]

    def pod(self, execution_id: str, generation: int = 0) -> dict[str, Any]:
        labels = {label("swarm"): self.swarm, OWNER_LABEL: owner_value(self.swarm)}
        started = {"running": {"startedAt": "2026-11-30T10:00:00Z"}}
        running = {"name": "worker", "ready": True, "state": started}
        meta = {"name": pod_name(execution_id), "labels": labels, "resourceVersion": str(generation)}
        return {
            "metadata": meta,
            "spec": {"nodeName": NODE},
            "status": {"phase": "Running", "containerStatuses": [running]},
        }

    def list(self, resource: str, namespace: str | None, selector: Any = None) -> list[dict[str, Any]]:
        self.calls += 1
        return list(self.pods.values()) if resource == "pods" else list(self.nodes)

    def patch(self, *a: Any, **kw: Any) -> dict[str, Any]:
        self.calls += 1
        return {}

    def create(self, *a: Any, **kw: Any) -> dict[str, Any]:
        self.calls += 1
        return {}


class NoLaunch:
    def launch(self, plan: Any) -> str:
        return "created"

    def exists(self, execution_id: str) -> bool:
        return True

    def retire(self, execution_id: str) -> None:
        return None


def median_of(repeat: int, call: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        call()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _runner(client: redis.Redis, n: int, spec: SwarmSpec) -> tuple[SwarmPass, MemoryKube, PodCache, Recovery]:
    """A swarm of ``n`` seats admitted, every seat's Pod Running, after its first (full) pass."""
    name = f"cached-{n}"
    kube = MemoryKube(name)
    recovery = Recovery(
        client, name, holder="bench", catalog=EmptyCatalog(), launcher=NoLaunch(), clock=RedisClock(client)
    )
    cache = PodCache()
    runner = SwarmPass(
        recovery=recovery,
        redis_client=client,
        keys=recovery.keys,
        kube=kube,  # type: ignore[arg-type]
        owner=Owner(name=name, namespace="bench", uid=None, controller="bench"),
        clock=RedisClock(client),
        pod_cache=cache,
    )
    if not recovery.acquire():
        raise SystemExit(f"{name}: the benchmark does not hold the lease")
    for plan in recovery.ensure_seats(spec):  # admitted and "launched": each has its Pod, Running
        kube.pods[pod_name(plan.execution_id)] = kube.pod(plan.execution_id)
    runner.run(spec)  # the first pass lists them all
    return runner, kube, cache, recovery


def run_size(
    port: int, n: int, repeat: int, spec: SwarmSpec, baseline: Callable[[redis.Redis, Recovery], float]
) -> float:
    """Prints the size's figures; returns its quiet pass's median (seconds)."""
    client = redis.Redis(host="127.0.0.1", port=port)
    client.flushall()
    runner, kube, cache, recovery = _runner(client, n, spec)
    try:
        names = sorted(kube.pods)

        def timed(before: Callable[[int], None]) -> tuple[float, float]:
            times, calls = [], []
            for i in range(repeat):
                before(i)
                c, t = kube.calls, time.perf_counter()
                runner.run(spec)
                times.append(time.perf_counter() - t)
                calls.append(kube.calls - c)
            return statistics.median(times), statistics.median(calls)

        def one_changed(i: int) -> None:
            pod = kube.pods[names[i % len(names)]]
            cache.feed("MODIFIED", {**pod, "metadata": {**pod["metadata"], "resourceVersion": str(i + 1)}})

        quiet = timed(lambda i: None)
        changed = timed(one_changed)
        full = timed(lambda i: cache.invalidate())
        admit = median_of(repeat, lambda: recovery.ensure_seats(spec))
        snap = median_of(repeat, lambda: snapshot(recovery._w))
        base = baseline(client, recovery)
        read = f"one pipelined Redis read of the pass's hashes, {base * 1e3:.2f} ms"
        print(f"\n-- {n} seats (baseline: {read})")
        for what, (took, calls) in (
            ("quiet pass (nothing changed)", quiet),
            ("pass after 1 Pod event", changed),
            ("full pass (cache invalidated)", full),
        ):
            print(f"{what:<31}: {took * 1e3:7.2f} ms = {took / base:5.1f}x the read; {calls:.0f} API calls")
        rest = quiet[0] - admit - snap
        print(
            f"  within the quiet pass: the seat check (ensure_seats) {admit * 1e3:.2f} ms and the core's "
            f"snapshot {snap * 1e3:.2f} ms (the seats map's version, not the map); the rest "
            f"{rest * 1e3:.2f} ms"
        )
        return quiet[0]
    finally:
        runner.close()
        client.close()


def interleaved_quiet(port: int, specs: dict[int, SwarmSpec], rounds: int) -> dict[int, tuple[float, float]]:
    """Every size's swarm set up side by side in this process, then ``rounds`` rounds of one quiet pass
    each, in turn: the machine's drift (another process, a frequency step) falls on every size alike,
    where sizes measured one after the other differed by up to 1.5x on the same code. Returns
    size → (median, p90) in seconds."""
    client = redis.Redis(host="127.0.0.1", port=port)
    client.flushall()
    made = {n: _runner(client, n, spec) for n, spec in specs.items()}
    times: dict[int, list[float]] = {n: [] for n in made}
    try:
        for _ in range(rounds):
            for n, (runner, *_rest) in made.items():
                t = time.perf_counter()
                runner.run(specs[n])
                times[n].append(time.perf_counter() - t)
        return {n: (statistics.median(ts), statistics.quantiles(ts, n=10)[-1]) for n, ts in times.items()}
    finally:
        for runner, *_rest in made.values():
            runner.close()
        client.close()
