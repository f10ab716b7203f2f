"""Benchmark the real node (issue 24): real Pods beside simulated ones, the product beside the Job controller.

Servers: etcd + kube-apiserver + kube-controller-manager on loopback (the tests' pinned version), a
private redis-server, and one real node: containerd, runc, a real kubelet and kube-scheduler
(tests/testsupport/realnode.py; root only). Images: the pause and probe images of
tests/testsupport/images.py (the probe is Debian's static busybox; generation 1 allocates far past
its 48 MiB limit and the kernel's memory cgroup kills it).

1. **Pod create → container running.** One Pod at a time, ``--samples`` times: the probe Pod
   through the scheduler onto the real node (the kubelet pulls nothing: the image is imported), and
   beside it, interleaved, the same Pod bound to a simulated node whose "kubelet" (the tests'
   ``RealKubelet``) writes it Running as soon as the Pod's ADDED event arrives. Clock: the create
   sent → the watch event showing the container running. Ratio: real / simulated.
2. **Failover after a kernel OOM kill**, at 1 failure (``--rounds`` times) and 10 at once:
   - the product: a Swarm of N seats, the operator in this process (its own thread and loop, the
     chart's RBAC), the first generation OOM-killed by the kernel; every attempt held a native session
     and a checkpoint is listed (as bench/failover.py does), so the operator resumes with no decision;
   - the peer: the Kubernetes Job controller of the same kube-controller-manager, an Indexed Job of N
     completions (``podReplacementPolicy: Failed``, ``backoffLimitPerIndex: 3``, a ``podFailurePolicy``
     counting exit 137) whose
     Pods OOM once per index (a hostPath marker), on the same node.
   Clock for both: the watch event reporting the container terminated (the first moment the control
   plane knows) → the watch event showing the replacement's container running. p50/p99 and the
   ratio product / Job controller.

Not a test: it asserts nothing. Run: ``sudo .venv/bin/python bench/realnode.py`` (a few minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))

import httpx
import realplane
import redis
from agentihooks_operator.recovery.store.keys import SwarmKeys
from realplane import EXE, GEN, SEAT, SESSION, BenchKubelet, NativeCatalog, note, pct
from testsupport import kubelet as kl
from testsupport.images import PROBE_REF, probe_image
from testsupport.kube import running_operator
from testsupport.realnode import IMAGES, POD_TEMPLATE, RealNode
from testsupport.redis_server import RedisServer

SIM_NODE = "bench-sim"
JOBS_NS = "bench-jobs"
INDEX = "batch.kubernetes.io/job-completion-index"
SECURITY = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "seccompProfile": {"type": "RuntimeDefault"},
}
LIMITS = {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "48Mi"}}
#: The Job's Pods: OOM once per index, as the probe's generation 1 does (busybox, same limit).
JOB_SCRIPT = (
    'm=/markers/$JOB_COMPLETION_INDEX; if [ ! -e "$m" ]; then /bin/busybox touch "$m"; '
    "/bin/busybox dd if=/dev/zero of=/dev/null bs=512M count=1; exit 4; fi; exec /bin/busybox sleep 100000"
)


class Watch:
    """All namespaces' Pods: when each was added, first ran, first ended; plays the simulated kubelet."""

    def __init__(self, cluster: Any, sim: BenchKubelet, on_added: Any) -> None:
        self.cluster, self.sim, self.on_added = cluster, sim, on_added
        self.running: dict[str, float] = {}
        self.ended: dict[str, float] = {}
        self.pods: dict[str, dict[str, Any]] = {}
        self._task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
        r = await self.cluster.http.get("/api/v1/pods")
        r.raise_for_status()
        self._task = asyncio.create_task(self._run(r.json()["metadata"]["resourceVersion"]))

    async def close(self) -> None:
        for task in [self._task, *self._tasks]:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def _run(self, version: str) -> None:
        async with httpx.AsyncClient(
            base_url=self.cluster.url, verify=self.cluster.plane.tls(), timeout=None
        ) as h:
            while True:  # the server ends a watch now and then: go on from the last version seen
                params = {"watch": "true", "resourceVersion": version}
                try:
                    async with h.stream("GET", "/api/v1/pods", params=params) as stream:
                        async for line in stream.aiter_lines():
                            if not line.strip():
                                continue
                            event = json.loads(line)
                            if event["type"] == "ERROR":  # e.g. 410: that version is compacted
                                raise httpx.StreamError(str(event["object"].get("message")))
                            version = event["object"]["metadata"].get("resourceVersion") or version
                            self._seen(event["type"], event["object"], time.perf_counter())
                except httpx.StreamError as e:  # the version is gone: list again, then watch from there
                    note(f"the Pod watch failed ({e}); listing again")
                    r = await h.get("/api/v1/pods")
                    r.raise_for_status()
                    for pod in r.json()["items"]:
                        self._seen("MODIFIED", pod, time.perf_counter())
                    version = r.json()["metadata"]["resourceVersion"]
                except httpx.HTTPError as e:
                    note(f"the Pod watch ended ({e.__class__.__name__}); watching again from {version}")
                    await asyncio.sleep(0.1)

    def _seen(self, kind: str, pod: dict[str, Any], at: float) -> None:
        name = pod["metadata"]["name"]
        self.pods[name] = pod
        if kind == "ADDED":
            self._spawn(self.on_added(pod))
            if (pod.get("spec") or {}).get("nodeName") == SIM_NODE:
                self._spawn(self.sim.set_status(name, kl.running(), node_name=SIM_NODE))
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            state = cs.get("state") or {}
            if "running" in state:
                self.running.setdefault(name, at)
            if "terminated" in state:
                self.ended.setdefault(name, at)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def wait(self, what: str, check: Any, within: float = 180.0) -> Any:
        deadline = time.monotonic() + within
        while (found := check()) is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {what} within {within:.0f} s")
            await asyncio.sleep(0.01)
        return found


def probe_pod(name: str, namespace: str, *, sim: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "terminationGracePeriodSeconds": 1,
        "containers": [
            {
                "name": "worker",
                "image": PROBE_REF,
                "imagePullPolicy": "Never",
                "resources": LIMITS,
                "securityContext": SECURITY,
                "env": [{"name": "PROBE_MODE", "value": "wait"}],
            }
        ],
    }
    spec |= {"nodeName": SIM_NODE} if sim else POD_TEMPLATE
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


async def create_to_running(cluster: Any, watch: Watch, samples: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"real": [], "simulated": []}
    path = f"/api/v1/namespaces/{cluster.namespace}/pods"
    for i in range(samples):
        for kind in ("real", "simulated"):
            name = f"start-{kind[:3]}-{i}"
            t0 = time.perf_counter()
            r = await cluster.http.post(
                path, json=probe_pod(name, cluster.namespace, sim=kind == "simulated")
            )
            r.raise_for_status()
            at = await watch.wait(f"{name} running", lambda n=name: watch.running.get(n))
            out[kind].append(at - t0)
            await cluster.http.delete(f"{path}/{name}", params={"gracePeriodSeconds": "0"})
    return out


def swarm_spec(seats: int, round_: int) -> dict[str, Any]:
    spec = realplane.swarm_spec(seats, interval=2.0)
    spec["image"] = PROBE_REF
    for seat in spec["seats"]:
        seat["task"]["id"] = f"{seat['task']['id']}-r{round_}"
    spec["podTemplate"] = {
        "spec": {
            **POD_TEMPLATE,
            "terminationGracePeriodSeconds": 1,
            "container": {
                "imagePullPolicy": "Never",
                "resources": LIMITS,
                "env": [{"name": "PROBE_MODE", "value": "oom"}],
            },
        }
    }
    return spec


async def product_round(cluster: Any, watch: Watch, seats: int, round_: int) -> list[float]:
    name = f"oom-{seats}-{round_}"
    await cluster.create_swarm(name, swarm_spec(seats, round_))

    def mine(gen: int) -> dict[str, str]:
        return {
            p["metadata"]["annotations"][SEAT]: n
            for n, p in list(watch.pods.items())
            if p["metadata"].get("labels", {}).get("swarm.agentihooks.io/swarm") == name
            and p["metadata"]["labels"].get(GEN) == str(gen)
        }

    def all_of(gen: int, running: bool) -> dict[str, str] | None:
        found = mine(gen)
        if len(found) < seats or (running and not all(n in watch.running for n in found.values())):
            return None
        return found

    first = await watch.wait("the first Pods", lambda: all_of(1, running=False))
    second = await watch.wait("every replacement running", lambda: all_of(2, running=True))
    out = [watch.running[second[s]] - watch.ended[first[s]] for s in first]
    path = f"/apis/agentihooks.io/v1alpha1/namespaces/{cluster.namespace}/swarms/{name}"
    await cluster.http.delete(path)  # its Pods go with it (owner references), freeing the node
    return out


async def job_round(cluster: Any, watch: Watch, work: Path, seats: int, round_: int) -> list[float]:
    name = f"oom-{seats}-{round_}"
    markers = work / "markers" / name  # bind-mounted: the container needs no way through its parents
    markers.mkdir(parents=True)
    markers.chmod(0o777)
    container = {
        "name": "worker",
        "image": PROBE_REF,
        "imagePullPolicy": "Never",
        "resources": LIMITS,
        "securityContext": SECURITY,
        "command": ["/bin/busybox", "sh", "-c", JOB_SCRIPT],
        "volumeMounts": [{"name": "markers", "mountPath": "/markers"}],
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": JOBS_NS},
        "spec": {
            "completionMode": "Indexed",
            "completions": seats,
            "parallelism": seats,
            "backoffLimitPerIndex": 3,
            "podReplacementPolicy": "Failed",
            "podFailurePolicy": {
                "rules": [{"action": "Count", "onExitCodes": {"operator": "In", "values": [137]}}]
            },
            "template": {
                "spec": {
                    **POD_TEMPLATE,
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 1,
                    "containers": [container],
                    "volumes": [{"name": "markers", "hostPath": {"path": str(markers), "type": "Directory"}}],
                }
            },
        },
    }
    r = await cluster.http.post(f"/apis/batch/v1/namespaces/{JOBS_NS}/jobs", json=job)
    r.raise_for_status()

    def of_job() -> dict[str, list[str]]:
        by_index: dict[str, list[str]] = {}
        for n, p in sorted(watch.pods.items(), key=lambda kv: kv[1]["metadata"]["creationTimestamp"]):
            if p["metadata"].get("labels", {}).get("job-name") == name:
                by_index.setdefault(p["metadata"]["labels"][INDEX], []).append(n)
        return by_index

    def replaced() -> dict[str, list[str]] | None:
        found = of_job()
        done = len(found) == seats and all(len(v) >= 2 and v[1] in watch.running for v in found.values())
        return found if done else None

    found = await watch.wait("every Job replacement running", replaced, within=600)
    out = [watch.running[v[1]] - watch.ended[v[0]] for v in found.values()]
    await cluster.http.delete(
        f"/apis/batch/v1/namespaces/{JOBS_NS}/jobs/{name}", params={"propagationPolicy": "Background"}
    )
    return out


def figures(label: str, values: list[float]) -> str:
    return f"{label:<34} n={len(values):<3} p50 {pct(values, 0.5):7.3f} s  p99 {pct(values, 0.99):7.3f} s"


async def measure(args: argparse.Namespace, work: Path) -> None:
    bindir = realplane.require_tools()
    redis_server = RedisServer(work / "redis")
    redis_server.start()
    try:
        async with realplane.real_cluster(bindir, work) as cluster:
            node = RealNode(cluster.plane)
            await asyncio.to_thread(node.up)
            try:
                await asyncio.to_thread(node.import_image, probe_image(IMAGES))
                r = await cluster.http.post("/api/v1/namespaces", json={"metadata": {"name": JOBS_NS}})
                r.raise_for_status()
                sim = BenchKubelet(cluster)
                await sim.put_node(SIM_NODE)
                heartbeats = redis.Redis.from_url(redis_server.url)

                async def on_added(pod: dict[str, Any]) -> None:  # each attempt holds a native session
                    labels = pod["metadata"].get("labels") or {}
                    if EXE in labels and labels.get(GEN) == "1":
                        key = SwarmKeys(
                            "agentihooks", labels["swarm.agentihooks.io/swarm"], cluster.namespace
                        ).heartbeats
                        beat = json.dumps({"session_id": SESSION, "at_ms": int(time.time() * 1000)})
                        await asyncio.to_thread(heartbeats.hset, key, labels[EXE], beat)

                watch = Watch(cluster, sim, on_added)
                await watch.start()
                starts = await create_to_running(cluster, watch, args.samples)
                product: dict[int, list[float]] = {1: [], 10: []}
                peer: dict[int, list[float]] = {1: [], 10: []}
                async with running_operator(
                    cluster,
                    redis_server.url,
                    catalog=NativeCatalog(PROBE_REF.rsplit(":", 1)[1]),
                    lease_ms=15000,
                ):
                    for seats, rounds in ((1, args.rounds), (10, 1)):
                        for i in range(rounds):  # interleaved: product, then peer, each round
                            product[seats] += await product_round(cluster, watch, seats, i)
                            peer[seats] += await job_round(cluster, watch, work, seats, i)
                            note(f"{seats} failure(s), round {i + 1}/{rounds} done")
                await watch.close()
            finally:
                await asyncio.to_thread(node.down)
    finally:
        redis_server.stop()
    print(figures("create -> running, real node", starts["real"]))
    print(figures("create -> running, simulated", starts["simulated"]))
    print(f"  ratio real/simulated: p50 {pct(starts['real'], 0.5) / pct(starts['simulated'], 0.5):.1f}x")
    for seats in (1, 10):
        print(figures(f"OOM -> running, product, N={seats}", product[seats]))
        print(figures(f"OOM -> running, Job ctrl, N={seats}", peer[seats]))
        p50 = pct(product[seats], 0.5) / pct(peer[seats], 0.5)
        p99 = pct(product[seats], 0.99) / pct(peer[seats], 0.99)
        print(f"  ratio product/Job controller: p50 {p50:.2f}x  p99 {p99:.2f}x")
    start = pct(starts["real"], 0.5)
    print(f"a real Pod start alone (create -> running p50) is {start:.3f} s of each failover above")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=10, help="Pod starts measured of each kind")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the 1-failure scenario")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs)")
    realplane.run_on_real_node(measure, parser.parse_args(), "bench-realnode-")


if __name__ == "__main__":
    main()
