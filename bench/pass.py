"""Benchmark one recovery pass: Redis round trips and time, as a ratio to a bare pipelined read.

For each swarm size (1,000 and 10,000 seats; ``--quick``: 1,000 only) it
starts a private redis-server (AOF on, fsync every second), admits every seat,
then measures:

* a pass over all attempts healthy;
* a pass where 1 % of the attempts failed, then one where 10 % failed (each
  failed attempt held a native session and has a native checkpoint, so it goes
  the whole way: fence, two releases, retire, decision, replacement launch).

The core runs with the operator's clock (:class:`RedisClock`: the write scripts
read ``TIME`` inside Redis). Round trips are counted at the connection (one per
command or pipeline sent, the clock's own ``TIME`` included), independently of
the core's own bookkeeping, and printed per failed attempt. The baseline is one pipelined read
of the same keys the pass reads (the snapshot hashes, plus the failed
attempts' fields), timed in the same run.

Then, on a real control plane started for this run (etcd + kube-apiserver +
kube-controller-manager at the version ``scripts/control-plane.sh`` pins, the
chart's RBAC, the operator's ServiceAccount token; ``--plane-sizes``, default
10 and 100 seats; ``--no-plane`` skips it), the operator's own pass
(``SwarmPass.run`` as its recovery loop builds it, in this process) over a
swarm whose N Pods exist on the API server, bound to a Node and Running:

* the first pass (admits the seats and creates their Secrets, ConfigMaps and
  Pods), for context;
* a healthy pass (lease, seats; the Pods from the swarm's Pod cache, which a
  watch on the API server feeds as kopf's does in the operator, so nothing is
  listed; status unchanged), the median of ``--plane-repeat``;
* a full pass: the same with the cache invalidated first, so the Pods are
  listed (what the first pass, a new lease epoch, a restarted watch and the
  60 s resync cost);
* a pass where 1 attempt (and, with 100 seats or more, 10 %) was OOM-killed
  by the kubelet: fence, releases, decision, the old Pod deleted and the
  replacement's Secret, ConfigMap and Pod created on the API server.

Each is printed beside two baselines measured in the same run on the same
servers just before it: one pipelined Redis read of the keys the pass reads,
and one list of the swarm's Pods (the operator's own client and label
selector). Redis round trips (including the clock's ``TIME``) and Kubernetes
API calls of the pass are counted. Not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

import redis
from agentihooks_checkpoint.catalog import CheckpointSummary
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_operator.recovery import AttemptObservation, LaunchPlan, LeaseLost, Recovery
from agentihooks_operator.recovery.store.clock import RedisClock
from agentihooks_operator.swarm import SwarmSpec

sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))
from redisproc import start_redis

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
        # the operator's clock: the scripts read TIME inside Redis, the offset re-syncs every 30 s
        r = Recovery(
            client,
            f"bench-{n}",
            holder="bench",
            catalog=catalog,
            launcher=launcher,
            clock=RedisClock(client),
        )
        r.load_scripts()
        spec = spec_of(n)
        t = time.perf_counter()
        try:
            plans = r.ensure_seats(spec)
        except LeaseLost:
            # Admission renews the lease between batches; if it is lost all the same (a stalled
            # machine), say so and go on with the next size rather than crash.
            print(
                f"\n== {n} attempts: admitting them took {time.perf_counter() - t:.1f} s, longer than the "
                f"lease (15 s, the default): the lease was lost, nothing measured at this size"
            )
            client.close()
            return
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


def plane_section(args: argparse.Namespace, bindir: Path) -> None:
    """The operator's pass on the real control plane, with its baselines (see the module's docstring)."""
    import realplane

    work = Path(tempfile.mkdtemp(prefix="bench-pass-plane-"))
    (work / "redis").mkdir()
    proc, port = start_redis(str(work / "redis"))

    async def bounded() -> None:
        async with asyncio.timeout(args.timeout):
            await plane_measure(args, bindir, work, port)

    try:
        asyncio.run(bounded())
    except TimeoutError as e:
        realplane.note(f"stopped: the control-plane section took longer than --timeout {args.timeout:.0f} s")
        raise SystemExit(1) from e
    finally:
        proc.terminate()
        proc.wait()
        realplane.remove(work)


async def plane_measure(args: argparse.Namespace, bindir: Path, work: Path, port: int) -> None:
    import realplane

    async with realplane.real_cluster(bindir, work) as cluster:
        print(
            f"\n== real control plane: {realplane.version(bindir)} (etcd, kube-apiserver, "
            f"kube-controller-manager) on {os.cpu_count()} cores; namespace {cluster.namespace}, "
            "the operator's ServiceAccount token with the chart's RBAC"
        )
        kubelet = realplane.BenchKubelet(cluster)
        watch = realplane.PodWatch(cluster, kubelet)
        try:
            await kubelet.put_node(realplane.NODE)
            await watch.start()
            for n in args.plane_sizes:
                await plane_size(args, cluster, kubelet, watch, port, n)
        finally:
            await watch.close()
            await kubelet.close()


class CallCounter:
    """Counts the Kubernetes API calls a client makes (every request sent, retries included)."""

    def __init__(self, kube: Any) -> None:
        self.calls = 0
        inner = kube._send

        def send(*a: Any, **kw: Any) -> Any:
            self.calls += 1
            return inner(*a, **kw)

        kube._send = send


async def plane_size(
    args: argparse.Namespace, cluster: Any, kubelet: Any, watch: Any, port: int, n: int
) -> None:
    import kopf
    import realplane
    from agentihooks_operator.k8s import handlers
    from agentihooks_operator.k8s.building.pods import label
    from agentihooks_operator.k8s.client import KubeClient
    from agentihooks_operator.k8s.config import OperatorConfig
    from testsupport import kubelet as kl

    name = f"pass-{n}"
    body = await cluster.create_swarm(name, realplane.swarm_spec(n))
    pool = redis.ConnectionPool(host="127.0.0.1", port=port, connection_class=CountingConnection)
    client = redis.Redis(connection_pool=pool)
    kube = KubeClient(
        cluster.url,
        token=cluster.token,
        ca_path=str(cluster.plane.ca.cert),
        agent="agentihooks-operator/bench",
    )
    counter = CallCounter(kube)
    config = OperatorConfig(
        redis_url=f"redis://127.0.0.1:{port}/0",
        operator_id="op-bench",
        namespaces=cluster.namespace,
        lease_ms=15000,
    )
    memo = kopf.Memo(
        config=config,
        kube=kube,
        redis=client,
        catalog=realplane.NativeCatalog(),
        clock=RedisClock(client),
    )
    runner = handlers._build_pass(memo, name, cluster.namespace, body["metadata"]["uid"], body)
    spec = handlers.parse_spec(body["spec"])
    unfeed = feed_from(watch, memo, cluster.namespace, name)  # as kopf's watch feeds the operator's

    def drained() -> None:  # the Events the last pass queued are posted (off the pass, as in the operator)
        runner._poster.submit(lambda: None).result()

    def one_pass() -> tuple[float, int, int, Any]:
        trips, calls = CountingConnection.sent, counter.calls
        t = time.perf_counter()
        result = runner.run(spec)
        took = time.perf_counter() - t
        if not result.leader:
            raise SystemExit(f"{name}: the benchmark's pass does not hold the lease")
        return took, CountingConnection.sent - trips, counter.calls - calls, result

    def pod_list(repeat: int) -> float:
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            kube.list("pods", cluster.namespace, {label("swarm"): name})
            times.append(time.perf_counter() - t)
        return statistics.median(times)

    def baselines(failed: list[str]) -> tuple[float, float]:
        return (
            pod_list(args.plane_repeat),
            baseline(client, runner.recovery, failed, args.plane_repeat),
        )

    def line(what: str, took: float, trips: int, calls: int, bases: tuple[float, float]) -> str:
        listed, read = bases
        return (
            f"{what}: {took * 1e3:.1f} ms = {took / listed:.1f}x one Pod list ({listed * 1e3:.2f} ms), "
            f"{took / read:.0f}x one pipelined Redis read ({read * 1e3:.2f} ms), "
            f"{took / (listed + read):.1f}x both; {trips} Redis round trips, {calls} API calls"
        )

    try:
        print(f"\n-- {n} seats (Swarm {name})")
        took, trips, calls, _ = await asyncio.to_thread(one_pass)
        await asyncio.to_thread(drained)
        print(
            f"first pass (admits {n} seats; creates their Secrets, ConfigMaps, Pods): {took * 1e3:.0f} ms, "
            f"{trips} Redis round trips, {calls} API calls"
        )
        pods = await watch.wait_newest(name, n, 1, within=args.wait)
        gate = asyncio.Semaphore(8)

        async def start(pod: dict[str, Any]) -> None:
            async with gate:
                await kubelet.set_status(pod["metadata"]["name"], kl.running(), node_name=realplane.NODE)

        await asyncio.gather(*(start(p) for p in pods.values()))
        await until(lambda: all(phase(watch, p) == "Running" for p in pods.values()), args.wait)
        await asyncio.to_thread(one_pass)  # publishes the status the Running Pods change
        await asyncio.to_thread(drained)
        runs = [await asyncio.to_thread(one_pass) for _ in range(args.plane_repeat)]
        bases = await asyncio.to_thread(baselines, [])
        times = [r[0] for r in runs]

        def full_pass() -> tuple[float, int, int, Any]:
            runner._cache.invalidate()  # as on a new lease epoch, a restarted watch, every 60 s
            return one_pass()

        fulls = [await asyncio.to_thread(full_pass) for _ in range(max(1, args.plane_repeat // 4))]
        print(
            line(
                f"healthy pass (median of {len(runs)}; p99 {realplane.pct(times, 0.99) * 1e3:.1f} ms)",
                statistics.median(times),
                int(statistics.median(r[1] for r in runs)),
                int(statistics.median(r[2] for r in runs)),
                bases,
            )
        )
        print(
            line(
                f"full pass, Pods listed (median of {len(fulls)})",
                statistics.median(r[0] for r in fulls),
                int(statistics.median(r[1] for r in fulls)),
                int(statistics.median(r[2] for r in fulls)),
                bases,
            )
        )
        seats = sorted(pods)
        offset = 0
        for k in sorted({1, n // 10} - {0}) if n >= 100 else [1]:
            chosen = seats[offset : offset + k]
            offset += k
            failed = [pods[s]["metadata"]["labels"][realplane.EXE] for s in chosen]
            for eid in failed:
                await asyncio.to_thread(runner.recovery.report_session, eid, realplane.SESSION)
            await asyncio.gather(
                *(kubelet.set_status(pods[s]["metadata"]["name"], kl.oom_killed()) for s in chosen)
            )
            names = [pods[s] for s in chosen]
            await until(lambda names=names: all(phase(watch, p) == "Failed" for p in names), args.wait)
            bases = await asyncio.to_thread(baselines, failed)
            took, trips, calls, result = await asyncio.to_thread(one_pass)
            report = result.report
            print(
                line(
                    f"pass with {k} OOM-killed "
                    f"({len(report.fenced)} fenced, {len(report.launches)} replaced)",
                    took,
                    trips,
                    calls,
                    bases,
                )
            )
            await asyncio.to_thread(drained)
    finally:
        unfeed()
        await asyncio.to_thread(runner.close)
        kube.close()
        client.close()


def phase(watch: Any, pod: dict[str, Any]) -> str | None:
    """The phase of ``pod`` as the watch last showed it."""
    seen = watch.pods.get(pod["metadata"]["name"]) or {}
    return (seen.get("status") or {}).get("phase")


async def until(check: Any, within: float) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit("the Pod watch did not show the expected Pod states in time")
        await asyncio.sleep(0.05)


def feed_from(watch: Any, memo: Any, namespace: str, swarm: str) -> Any:
    """Hand every Pod event of ``watch`` to the swarm's Pod cache, as ``handlers.pod_changed`` does;
    returns the call that stops it."""
    import realplane
    from agentihooks_operator.k8s.observing import podcache

    seen = watch._seen

    def fed(kind: str, pod: dict[str, Any], meta: dict[str, Any], arrived: float) -> None:
        seen(kind, pod, meta, arrived)
        label = (meta.get("labels") or {}).get(realplane.SWARM)
        podcache.feed(memo, namespace, label, {"type": kind, "object": pod})

    watch._seen = fed
    return lambda: setattr(watch, "_seen", seen)


def cached_section(args: argparse.Namespace) -> None:
    """The operator's healthy pass with the watch-fed Pod cache, by size (bench/support/cachedpass.py)."""
    import cachedpass

    print(
        "\n== the operator's pass with its Pod cache (SwarmPass on a private redis-server, an in-memory "
        "Kubernetes API; medians of --repeat, at least 15)"
    )
    repeat = max(args.repeat, 15)  # a quiet pass is short: more samples steady its median
    work = tempfile.mkdtemp(prefix="bench-pass-cached-")
    proc, port = start_redis(work)
    quiet: dict[int, float] = {}
    try:
        for n in args.cache_sizes:
            read = lambda client, r: baseline(client, r, [], repeat)  # noqa: E731
            quiet[n] = cachedpass.run_size(port, n, repeat, spec_of(n), read)
        smallest = min(quiet)
        print(f"\n-- a quiet pass by size, one size after another (above), over the one at {smallest} seats")
        for n, took in sorted(quiet.items()):
            print(f"{n:>7} seats: {took * 1e3:7.2f} ms = {took / quiet[smallest]:5.2f}x")
        rounds = max(args.repeat, 200)
        print(
            f"\n-- a quiet pass by size, every size set up side by side and their passes taken in turn "
            f"({rounds} rounds), over the one at {smallest} seats"
        )
        turns = cachedpass.interleaved_quiet(port, {n: spec_of(n) for n in args.cache_sizes}, rounds)
        low = turns[smallest][0]
        for n, (median, p90) in sorted(turns.items()):
            print(
                f"{n:>7} seats: median {median * 1e3:6.3f} ms, p90 {p90 * 1e3:6.3f} ms = {median / low:5.2f}x"
            )
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)


def sizes(text: str) -> list[int]:
    values = [int(v) for v in text.split(",") if v.strip()]
    if any(v < 1 for v in values):
        raise argparse.ArgumentTypeError("a comma-separated list of positive sizes, e.g. 10,100")
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Redis: 1,000 attempts only")
    parser.add_argument(
        "--repeat", type=int, default=5, help="healthy passes and baseline reads to take the median of"
    )
    parser.add_argument(
        "--plane-sizes",
        type=sizes,
        default=[10, 100],
        help="seats on the real control plane (default 10,100)",
    )
    parser.add_argument(
        "--plane-repeat", type=int, default=20, help="healthy passes and baselines there (default 20)"
    )
    parser.add_argument("--no-plane", action="store_true", help="Redis only: no control plane")
    parser.add_argument(
        "--cache-sizes",
        type=sizes,
        default=[100, 1000, 5000, 50000],
        help="seats of the cached-pass section (default 100,1000,5000,50000; bench/support/cachedpass.py)",
    )
    parser.add_argument("--wait", type=float, default=120.0, help="longest wait for Pods, in seconds")
    parser.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="the control-plane section stops after this (default 300 s)",
    )
    args = parser.parse_args()
    bindir = None
    if not args.no_plane and args.plane_sizes:
        import realplane

        bindir = realplane.require_tools()
    for n in (1000,) if args.quick else (1000, 10000):
        run_size(n, args.repeat)
    cached_section(args)
    if bindir is not None:
        plane_section(args, bindir)


if __name__ == "__main__":
    main()
