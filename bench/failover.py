"""Benchmark failover on a real control plane: from the status patch killing a worker Pod to its replacement.

Servers: etcd + kube-apiserver (RBAC, audit log) + kube-controller-manager at
the version ``scripts/control-plane.sh`` pins, started for this run on
loopback, and a private redis-server. The real operator
(``agentihooks_operator.main.run`` in its own process, so it does not share
the benchmark's interpreter) runs with the chart's RBAC as its only rights: its
kubeconfig holds a TokenRequest token of the chart's ServiceAccount, and it
watches the benchmark's namespace only (Pod Security ``restricted``). Every
failed attempt held a native session (written as its heartbeat would) and has
a native checkpoint listed, so recovery goes the whole way without a human:
fence, releases, decision, launch (the fenced Pod's deletion beside it).

Failure: the simulated kubelet binds every seat's Pod to a Node it keeps
alive, writes it Running, then writes OOMKilled through the status
subresource. Clock: it starts just before that status patch is sent and stops
when the replacement Pod's ADDED event arrives on a watch of the namespace's
Pods held by this process (timestamped on arrival). That is one watch
delivery later than the create reaching the API server; the audit log's
``requestReceivedTimestamp`` of each create is printed beside it for context.

Scenarios (``--sizes``, default 1,10,100): 1 failure, repeated ``--rounds``
times on a one-seat swarm; 10 and 100 simultaneous failures, each in a swarm
of that many seats, all Pods killed at once. ``--fleet`` adds 1000
simultaneous failures across 10 swarms of 100 seats (every Pod of every swarm
killed at once; the samples of all ten swarms make one scenario). Baseline: one Pod status patch
plus the watch event it produces (a probe Pod in the same namespace, its own
watch), ``--samples`` times on the same API server immediately before each
round of each scenario, so it sees the same stored objects and the same idle
operator. Figures are p50/p99, printed absolute and as ratios to that
baseline's p50/p99. Not a test: it asserts nothing. ``--profile`` writes the
operator's per-pass and per-call timings to its log (kept with ``--keep``).

Beside the product, in the same run and interleaved round by round on the
same API server (:mod:`peers`; ``--no-peers`` leaves them out): the
Kubernetes Job controller replacing the OOM-killed Pods of Indexed Jobs
(``podReplacementPolicy: Failed``, a ``podFailurePolicy`` counting exit 137;
``--job-rounds`` of them, as each waits its per-index back-off), a bare client
sending the product's own writes per failure from its watch event (Secret
and Pod created, the failed Pod deleted: the floor of those writes),
and a bare client sending one Pod create per failure (the floor of any
recovery). The same kill, the same clock. The last table prints all four and
the ratios product / peer, and reads the issue's goals off them.

``--core-latency-ms N`` instead runs the recovery core alone (real Redis,
``Recovery.reconcile``, no Kubernetes) with an in-memory launcher whose every
call takes N ms, and prints ``--seats`` failures as a ratio to one failure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))

import peers
import realplane
from agentihooks_operator.recovery.store.keys import SwarmKeys
from realplane import (
    EXE,
    GEN,
    MERGE,
    NODE,
    SESSION,
    TAG,
    BenchKubelet,
    NativeCatalog,
    PodWatch,
    StatusProbe,
    note,
    pct,
)
from testsupport import kubelet as kl
from testsupport.realcluster import RealCluster
from testsupport.redis_server import RedisServer, free_port


@dataclass
class Scenario:
    label: str
    objects: int
    baseline: list[float]
    latencies: list[float]
    audit: list[float]
    #: Kill answered (the OOMKilled status stored) -> the replacement's ADDED event.
    after_answer: list[float] = field(default_factory=list)
    #: The longest time from a round's first kill sent to its last kill answered.
    spread: float = 0.0
    #: The same failures of the peers, interleaved with the product's rounds (:mod:`peers`):
    #: ``job`` (the Job controller), ``writes`` (a bare client's writes of the product), ``create``
    #: (a bare client's one Pod create).
    peers: dict[str, list[float]] = field(default_factory=dict)

    def note_peers(self, found: dict[str, list[float]]) -> None:
        for system, values in found.items():
            self.peers.setdefault(system, []).extend(values)


PEERS = ("job", "writes", "create")


async def peer_rounds(
    args: argparse.Namespace,
    cluster: RealCluster,
    kubelet: BenchKubelet,
    watch: PodWatch,
    floors: dict[str, peers.FloorGroup],
    label: str,
    count: int,
    seats: int,
    round_: int,
) -> dict[str, list[float]]:
    """One round of each peer, right after the product's round of the same failures."""
    out: dict[str, list[float]] = {}
    for system, group in floors.items():
        note(f"{label}: the bare client ({system}) replacing {count * seats} Pod(s)")
        out[system] = await group.round(args.settle, args.wait)
    if round_ < args.job_rounds:
        note(f"{label}: the Job controller replacing {count * seats} Pod(s)")
        out["job"] = await peers.job_round(
            cluster, kubelet, watch, f"job-{label}-{round_}", count, seats, NODE, args.settle, args.wait
        )
    return out


async def start_floors(
    args: argparse.Namespace,
    cluster: RealCluster,
    kubelet: BenchKubelet,
    watch: PodWatch,
    label: str,
    count: int,
    seats: int,
) -> dict[str, peers.FloorGroup]:
    if args.no_peers:
        return {}
    floors = {
        "writes": peers.FloorGroup(cluster, kubelet, watch, f"fw-{label}", "product", count, seats, NODE),
        "create": peers.FloorGroup(cluster, kubelet, watch, f"fc-{label}", "pod", count, seats, NODE),
    }
    for group in floors.values():
        await group.start(args.wait)
    return floors


async def make_running(
    kubelet: BenchKubelet, redis_url: str, swarm: str, pods: dict[str, Any], namespace: str
) -> None:
    """Bind and start every Pod, and record the native session each attempt holds (its heartbeat)."""
    gate = asyncio.Semaphore(8)

    async def start(pod: dict[str, Any]) -> None:
        async with gate:
            await kubelet.set_status(pod["metadata"]["name"], kl.running(), node_name=NODE)

    await asyncio.gather(*(start(p) for p in pods.values()))
    client = redis.Redis.from_url(redis_url)
    beat = json.dumps({"session_id": SESSION, "at_ms": int(time.time() * 1000)})
    key = SwarmKeys("agentihooks", swarm, namespace).heartbeats
    client.hset(key, mapping={p["metadata"]["labels"][EXE]: beat for p in pods.values()})
    client.close()


def _stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def audit_latencies(
    cluster: RealCluster, wanted: dict[str, str], started_wall: dict[str, float]
) -> list[float]:
    """Kill → the replacement's create received by the API server (``requestReceivedTimestamp``)."""
    out: list[float] = []
    for event in cluster.plane.audit_events():
        ref = event.get("objectRef") or {}
        if event.get("verb") != "create" or ref.get("resource") != "pods" or ref.get("subresource"):
            continue
        seat = wanted.get(str(ref.get("name") or ""))
        if seat is not None and event.get("requestReceivedTimestamp"):
            out.append(_stamp(event["requestReceivedTimestamp"]) - started_wall[seat])
    return out


async def fail_all(
    cluster: RealCluster, watch: PodWatch, swarm: str, pods: dict[str, Any], within: float
) -> tuple[list[float], list[float], list[float], float]:
    """Kill every Pod in ``pods`` at once. Each seat's latency to its replacement: from its kill sent
    (watch; audit), from its kill answered (watch); and how long after the first kill was sent the
    last one was answered."""
    old_gen = {seat: int(p["metadata"]["labels"][GEN]) for seat, p in pods.items()}
    paths = {
        seat: f"/api/v1/namespaces/{cluster.namespace}/pods/{p['metadata']['name']}"
        for seat, p in pods.items()
    }
    started: dict[str, float] = {}
    started_wall: dict[str, float] = {}
    answered: dict[str, float] = {}
    n = len(pods)
    # One warm connection per Pod, so no kill waits for a TLS handshake or a free connection.
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
    async with httpx.AsyncClient(
        base_url=cluster.url, verify=cluster.plane.tls(), timeout=30, limits=limits
    ) as http:
        bodies = await realplane.oom_bodies(http, paths)

        async def kill(seat: str) -> None:
            started_wall[seat] = time.time()
            started[seat] = time.perf_counter()
            r = await http.patch(paths[seat] + "/status", json=bodies[seat], headers=MERGE)
            r.raise_for_status()
            answered[seat] = time.perf_counter()

        await asyncio.gather(*(kill(seat) for seat in pods))
    spread = max(answered.values()) - min(started.values())
    deadline = time.monotonic() + within
    while True:
        found = {
            a.seat: (name, a.at)
            for name, a in list(watch.added.items())
            if a.swarm == swarm and a.seat in old_gen and a.generation == old_gen[a.seat] + 1
        }
        if len(found) == n:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"{swarm}: {len(found)} of {n} replacements within {within:.0f} s")
        await asyncio.sleep(0.02)
    by_watch = [found[s][1] - started[s] for s in pods]
    after_answer = [found[s][1] - answered[s] for s in pods]
    wanted = {name: seat for seat, (name, _) in found.items()}
    for _ in range(20):  # a create's audit line is written as its response completes: maybe not yet
        by_audit = await asyncio.to_thread(audit_latencies, cluster, wanted, started_wall)
        if len(by_audit) >= n:
            break
        await asyncio.sleep(0.1)
    return by_watch, by_audit, after_answer, spread


async def scenario(
    args: argparse.Namespace,
    cluster: RealCluster,
    kubelet: BenchKubelet,
    watch: PodWatch,
    probe: StatusProbe,
    redis_url: str,
    size: int,
) -> Scenario:
    name = "one" if size == 1 else f"swarm-{size}"
    rounds = args.rounds if size == 1 else args.swarm_rounds
    note(f"{size} seat(s): creating Swarm {name}")
    await cluster.create_swarm(name, realplane.swarm_spec(size))
    out = Scenario(
        label="1 failure" if size == 1 else f"{size} simultaneous failures",
        objects=0,
        baseline=[],
        latencies=[],
        audit=[],
    )
    floors = await start_floors(args, cluster, kubelet, watch, str(size), 1, size)
    for i in range(rounds):
        pods = await watch.wait_newest(name, size, i + 1, within=args.wait)
        await make_running(kubelet, redis_url, name, pods, cluster.namespace)
        await asyncio.sleep(args.settle)  # the pass our Running patches triggered is over
        out.objects = await realplane.object_count(cluster)
        out.baseline += await probe.measure(args.samples)
        note(f"{name}: failing {size} Pod(s) at once (round {i + 1} of {rounds})")
        by_watch, by_audit, after_answer, spread = await fail_all(
            cluster, watch, name, pods, within=args.wait
        )
        out.latencies += by_watch
        out.audit += by_audit
        out.after_answer += after_answer
        out.spread = max(out.spread, spread)
        if not args.no_peers:
            out.note_peers(await peer_rounds(args, cluster, kubelet, watch, floors, str(size), 1, size, i))
    for group in floors.values():
        await group.close()
    return out


async def fleet(
    args: argparse.Namespace,
    cluster: RealCluster,
    kubelet: BenchKubelet,
    watch: PodWatch,
    probe: StatusProbe,
    redis_url: str,
    swarms: int,
    size: int,
) -> Scenario:
    """``swarms`` swarms of ``size`` seats each, every Pod of every swarm killed at once."""
    names = [f"fleet-{i}" for i in range(swarms)]
    note(f"{swarms} swarms of {size} seats: creating them")
    for name in names:
        await cluster.create_swarm(name, realplane.swarm_spec(size))
    pods = {name: await watch.wait_newest(name, size, 1, within=args.wait) for name in names}
    for name in names:
        await make_running(kubelet, redis_url, name, pods[name], cluster.namespace)
    await asyncio.sleep(max(args.settle, 3.0))
    out = Scenario(
        label=f"{swarms * size} simultaneous failures across {swarms} swarms",
        objects=await realplane.object_count(cluster),
        baseline=await probe.measure(args.samples),
        latencies=[],
        audit=[],
    )
    note(f"failing {swarms * size} Pods at once")
    results = await asyncio.gather(
        *(fail_all(cluster, watch, name, pods[name], within=args.wait) for name in names)
    )
    for by_watch, by_audit, after_answer, spread in results:
        out.latencies += by_watch
        out.audit += by_audit
        out.after_answer += after_answer
        out.spread = max(out.spread, spread)
    floors = await start_floors(args, cluster, kubelet, watch, "fleet", swarms, size)
    if not args.no_peers:
        out.note_peers(await peer_rounds(args, cluster, kubelet, watch, floors, "fleet", swarms, size, 0))
    for group in floors.values():
        await group.close()
    return out


def operator_env(cluster: RealCluster, redis_url: str, profile: bool) -> dict[str, str]:
    return {
        **os.environ,
        "KUBECONFIG": str(cluster.kubeconfig),
        "AGENTIHOOKS_REDIS_URL": redis_url,
        "AGENTIHOOKS_OPERATOR_ID": "op-bench",
        "AGENTIHOOKS_NAMESPACES": cluster.namespace,
        "AGENTIHOOKS_SCAN_NAMESPACES": "false",
        "AGENTIHOOKS_LEASE_MS": "15000",
        "AGENTIHOOKS_RETRY_DELAY_SECONDS": "0.5",
        # The control API runs in the operator as in the chart, on a free loopback port.
        "AGENTIHOOKS_CONTROL_HOST": "127.0.0.1",
        "AGENTIHOOKS_CONTROL_PORT": str(free_port()),
        "BENCH_PROFILE": "1" if profile else "",
    }


async def stop_process(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        await asyncio.to_thread(proc.wait, 30)
    except subprocess.TimeoutExpired:
        proc.kill()
        await asyncio.to_thread(proc.wait, 30)


async def measure(
    args: argparse.Namespace, bindir: Path, work: Path
) -> tuple[list[float], int, list[Scenario]]:
    redis_server = RedisServer(work / "redis")
    redis_server.start()
    try:
        async with realplane.real_cluster(bindir, work) as cluster:
            kubelet = BenchKubelet(cluster)
            watch = PodWatch(cluster, kubelet)
            proc: subprocess.Popen[bytes] | None = None
            try:
                await kubelet.put_node(NODE)
                await watch.start()
                probe = StatusProbe(cluster)
                await probe.create()
                fresh_objects = await realplane.object_count(cluster)
                fresh = await probe.measure(args.samples)
                note("baseline on the fresh API server done; starting the operator process")
                with (work / "operator.log").open("wb") as log:
                    proc = subprocess.Popen(  # noqa: ASYNC220 - a long-lived child, not awaited
                        [sys.executable, __file__, "--serve-operator"],
                        env=operator_env(cluster, redis_server.url, args.profile),
                        stdout=log,
                        stderr=log,
                    )
                scenarios = [
                    await scenario(args, cluster, kubelet, watch, probe, redis_server.url, size)
                    for size in args.sizes
                ]
                if args.fleet:
                    scenarios.append(
                        await fleet(args, cluster, kubelet, watch, probe, redis_server.url, 10, 100)
                    )
                note("all replacements created; stopping")
            finally:
                if proc is not None:
                    await stop_process(proc)
                await watch.close()
                await kubelet.close()
    finally:
        redis_server.stop()
    return fresh, fresh_objects, scenarios


def ratio(x: float) -> str:
    return f"{x:.1f}x" if x < 10 else f"{x:.0f}x"


def report(bindir: Path, fresh: list[float], fresh_objects: int, scenarios: list[Scenario]) -> None:
    f50, f99 = pct(fresh, 0.5), pct(fresh, 0.99)
    print(f"control plane: {realplane.version(bindir)} (etcd, kube-apiserver, kube-controller-manager)")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the end")
    print(
        "clock: kill (the kubelet's OOMKilled status patch sent) -> the replacement Pod's ADDED event "
        "received on this process's watch; baseline: a Pod status patch -> its watch event"
    )
    print(
        f"baseline on the fresh API server ({fresh_objects} objects in the namespace), {len(fresh)} samples: "
        f"p50 {f50 * 1e3:.2f} ms, p99 {f99 * 1e3:.2f} ms"
    )
    rows = []
    for s in scenarios:
        b50, b99 = pct(s.baseline, 0.5), pct(s.baseline, 0.99)
        p50, p99 = pct(s.latencies, 0.5), pct(s.latencies, 0.99)
        context = []
        if s.audit:
            context.append(
                f"create received by the API server (audit) p50 {pct(s.audit, 0.5) * 1e3:.1f} ms, "
                f"p99 {pct(s.audit, 0.99) * 1e3:.1f} ms"
            )
        context.append(
            f"from each kill's answer instead of its send p50 {pct(s.after_answer, 0.5) * 1e3:.1f} ms, "
            f"p99 {pct(s.after_answer, 0.99) * 1e3:.1f} ms"
        )
        print(
            f"{s.label}: baseline just before ({s.objects} objects, {len(s.baseline)} samples) "
            f"p50 {b50 * 1e3:.2f} ms, p99 {b99 * 1e3:.2f} ms; {len(s.latencies)} replacements "
            f"p50 {p50 * 1e3:.1f} ms = {p50 / b50:.1f}x, p99 {p99 * 1e3:.1f} ms = {p99 / b99:.1f}x"
        )
        print(
            f"    every kill answered within {s.spread * 1e3:.0f} ms of the first sent; " + "; ".join(context)
        )
        rows.append(
            f"| {s.label} | {len(s.latencies)} | {b50 * 1e3:.2f} / {b99 * 1e3:.2f} ms | "
            f"{p50 * 1e3:.0f} ms | {p99 * 1e3:.0f} ms | {ratio(p50 / b50)} | {ratio(p99 / b99)} |"
        )
    print("\n| scenario | replacements | baseline p50 / p99 | p50 | p99 | p50 / base p50 | p99 / base p99 |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    if any(s.peers for s in scenarios):
        peer_table(scenarios)


def _ms(values: list[float], q: float) -> str:
    return f"{pct(values, q) * 1e3:.0f} ms" if values else "-"


def _over(a: list[float], b: list[float], q: float) -> str:
    return f"{pct(a, q) / pct(b, q):.2f}x" if a and b else "-"


def peer_table(scenarios: list[Scenario]) -> None:
    """The four systems side by side (same run, interleaved), and the issue's goals read off them."""
    print(
        "\nkill -> replacement's ADDED event, p50 / p99 (same API server, same run, rounds interleaved);"
        "\njob: the Job controller (Indexed, podReplacementPolicy Failed); writes: a bare client sending"
        "\nthe product's writes per failure (Secret and Pod create, failed Pod delete) from its watch"
        "\nevent; create: a bare client sending one Pod create"
    )
    print(
        "\n| scenario | product | Job controller | floor: product's writes | floor: one create "
        "| product / Job p50, p99 | product / writes p50, p99 | product / create p50, p99 |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for s in scenarios:
        p, j, w, c = s.latencies, s.peers.get("job", []), s.peers.get("writes", []), s.peers.get("create", [])
        cells = [f"{_ms(v, 0.5)} / {_ms(v, 0.99)}" for v in (p, j, w, c)]
        ratios = [f"{_over(p, v, 0.5)}, {_over(p, v, 0.99)}" for v in (j, w, c)]
        print(f"| {s.label} | " + " | ".join(cells + ratios) + " |")
    print("\ngoals (issue 28; read here, never asserted):")
    for s in scenarios:
        w, c, j = s.peers.get("writes", []), s.peers.get("create", []), s.peers.get("job", [])
        if not w:
            continue
        p = s.latencies
        checks = [f"product <= 1.1x its writes' floor: p50 {_over(p, w, 0.5)}, p99 {_over(p, w, 0.99)}"]
        if c and len(s.latencies) == 100:
            checks.append(f"<= 1.5x one create at 100: p50 {_over(s.latencies, c, 0.5)}")
        if j:
            checks.append(
                "ahead of the Job controller: "
                + ("yes" if pct(s.latencies, 0.99) < pct(j, 0.5) else f"p50 {_over(s.latencies, j, 0.5)}")
            )
        print(f"  {s.label}: " + "; ".join(checks))


def run(args: argparse.Namespace) -> None:
    bindir = realplane.require_tools()
    work = Path(tempfile.mkdtemp(prefix="bench-failover-"))

    async def bounded() -> tuple[list[float], int, list[Scenario]]:
        async with asyncio.timeout(args.timeout):
            return await measure(args, bindir, work)

    try:
        fresh, fresh_objects, scenarios = asyncio.run(bounded())
    except TimeoutError as e:
        note(f"stopped: {str(e) or f'the run took longer than --timeout {args.timeout:.0f} s'}")
        raise SystemExit(1) from e
    finally:
        if args.keep:
            note(f"kept {work} (operator.log, plane/logs, plane/audit.log)")
        else:
            realplane.remove(work)
    report(bindir, fresh, fresh_objects, scenarios)


def _time_calls() -> None:
    """Log how long every Kubernetes request and every Redis write script of the operator takes."""
    from agentihooks_operator.k8s.client import KubeClient
    from agentihooks_operator.recovery.store.writer import Writer

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

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(threadName)s %(name)s %(message)s")
    if os.environ.get("BENCH_PROFILE"):
        logging.getLogger().setLevel(logging.INFO)
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
            result = r.reconcile(spec, obs)
            took[n] = time.perf_counter() - t0
            if len(result.launches) != n:
                raise SystemExit(f"the core launched {len(result.launches)} of {n} replacements")
        client.close()
    finally:
        server.stop()
        realplane.remove(work)
    print(
        f"recovery core, every launcher call {args.core_latency_ms:.0f} ms: "
        f"1 failure {took[1] * 1e3:.0f} ms; "
        f"{args.seats} failures {took[args.seats] * 1e3:.0f} ms = {took[args.seats] / took[1]:.1f}x one"
    )


def sizes(text: str) -> list[int]:
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError("a comma-separated list of positive sizes, e.g. 1,10,100")
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        type=sizes,
        default=[1, 10, 100],
        help="simultaneous failures per scenario (default 1,10,100)",
    )
    parser.add_argument(
        "--rounds", type=int, default=5, help="repetitions of the 1-failure scenario (default 5)"
    )
    parser.add_argument(
        "--swarm-rounds", type=int, default=1, help="repetitions of each larger scenario (default 1)"
    )
    parser.add_argument("--samples", type=int, default=100, help="baseline samples per round (default 100)")
    parser.add_argument("--quick", action="store_true", help="a short run: sizes 1,10, 2 rounds, 50 samples")
    parser.add_argument(
        "--settle",
        type=float,
        default=1.0,
        help="seconds between making Pods run and killing them (default 1)",
    )
    parser.add_argument(
        "--wait", type=float, default=180.0, help="longest wait for Pods, in seconds (default 180)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=900.0,
        help="the whole run stops after this many seconds (default 900)",
    )
    parser.add_argument(
        "--fleet",
        action="store_true",
        help="also 1000 simultaneous failures across 10 swarms of 100 (raises --timeout to at least 1500)",
    )
    parser.add_argument(
        "--no-peers",
        action="store_true",
        help="the product alone: no Job controller and no bare-client floors beside it",
    )
    parser.add_argument(
        "--job-rounds",
        type=int,
        default=2,
        help="rounds of the Job controller per scenario (each waits its 10 s back-off; default 2)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs, audit log)")
    parser.add_argument(
        "--profile", action="store_true", help="per-pass and per-call timings in the operator log"
    )
    parser.add_argument(
        "--core-latency-ms",
        type=float,
        default=None,
        help="instead: the recovery core alone with a launcher whose calls take this long",
    )
    parser.add_argument(
        "--seats", type=int, default=100, help="failures of the --core-latency-ms mode (default 100)"
    )
    parser.add_argument("--serve-operator", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_operator:
        serve_operator()
        return
    if args.core_latency_ms is not None:
        core(args)
        return
    if args.quick:
        args.sizes, args.rounds, args.samples = [1, 10], 2, 50
    if args.fleet:
        args.timeout = max(args.timeout, 1500.0)
    run(args)


if __name__ == "__main__":
    main()
