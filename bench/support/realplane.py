"""What the benchmarks share on the real control plane: start-up, a Pod watch, the probe baseline.

The control plane is the one the integration tests use (``tests/testsupport``):
etcd + kube-apiserver (RBAC, audit log at Metadata level) +
kube-controller-manager at the version ``scripts/control-plane.sh`` pins, on
loopback, with the chart's Swarm CRD, a namespace that enforces Pod Security
``restricted``, the chart's RBAC rendered for it and the operator's
ServiceAccount token kubeconfig (:class:`RealCluster`).

:func:`require_tools` finds the binaries with ``scripts/control-plane.sh
--check`` (and the pinned helm the chart's RBAC is rendered with) and exits
non-zero with a clear message when they are missing: a benchmark never builds
them (a cold build takes tens of minutes).

:class:`PodWatch` is one watch on the namespace's Pods in the benchmark's own
process: it notes when each Pod's ADDED event arrives (the failover clock) and
plays the kubelet's part of a graceful deletion from the same events (the
container stops, the Pod object is removed), instead of the simulated
kubelet's 0.2 s polling list, which would load the API server under
measurement. :class:`StatusProbe` is the bare baseline: one Pod status patch
and the watch event it produces, on the same API server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

import httpx  # noqa: E402
from agentihooks_checkpoint.catalog import CheckpointSummary  # noqa: E402
from agentihooks_checkpoint.scope import StoreScope  # noqa: E402
from testsupport.controlplane import BINARIES, ControlPlane  # noqa: E402
from testsupport.helm import make_helm, tools_bin  # noqa: E402
from testsupport.node import RealKubelet  # noqa: E402
from testsupport.realcluster import RealCluster, install_crd  # noqa: E402

SCRIPT = ROOT / "scripts" / "control-plane.sh"
SESSION = "sess-bench"
TAG = "2.1.0"
GEN = "swarm.agentihooks.io/generation"
SEAT = "swarm.agentihooks.io/seat"
EXE = "swarm.agentihooks.io/execution-id"
SWARM = "swarm.agentihooks.io/swarm"
NODE = "bench-node"
MERGE = {"Content-Type": "application/merge-patch+json"}


def note(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def require_tools() -> Path:
    """The folder of etcd, kube-apiserver and kube-controller-manager, or exit 2 saying how to get them."""
    found = subprocess.run(["bash", str(SCRIPT), "--check"], capture_output=True, text=True, check=False)
    lines = found.stdout.strip().splitlines()
    folder = Path(lines[-1]) if found.returncode == 0 and lines else None
    if folder is None or not all((folder / b).is_file() for b in BINARIES):
        print(
            "error: no control-plane binaries (etcd, kube-apiserver, kube-controller-manager): "
            "`bash scripts/control-plane.sh --check` found none. Build them once with "
            "`bash scripts/control-plane.sh` (cold: 20-30 min), or set KUBEBUILDER_ASSETS to a folder "
            "that holds all three.",
            file=sys.stderr,
        )
        raise SystemExit(2)
    helm = tools_bin() / "helm"
    if not (helm.is_file() and os.access(helm, os.X_OK)):
        print(
            f"error: no helm in {tools_bin()} (the chart's RBAC is rendered with it): "
            "run scripts/install-deps.sh",
            file=sys.stderr,
        )
        raise SystemExit(2)
    return folder


def version(bindir: Path) -> str:
    res = subprocess.run(
        [str(bindir / "kube-apiserver"), "--version"], capture_output=True, text=True, check=False
    )
    return (res.stdout or res.stderr).strip() or "unknown"


@contextlib.asynccontextmanager
async def real_cluster(bindir: Path, work: Path) -> AsyncIterator[RealCluster]:
    """A fresh control plane in ``work`` with the CRD, one namespace, the chart's RBAC; all stopped after."""
    plane = ControlPlane(bindir, work / "plane")
    cluster: RealCluster | None = None
    try:
        t0 = time.perf_counter()
        await asyncio.to_thread(plane.start)
        await asyncio.to_thread(install_crd, plane)
        helm = make_helm(work)
        cluster = await asyncio.to_thread(RealCluster.create, plane, helm, work, "bench")
        note(f"control plane up in {time.perf_counter() - t0:.1f} s ({version(bindir)})")
        yield cluster
    finally:
        if cluster is not None:
            await cluster.http.aclose()
        await asyncio.to_thread(plane.stop)


class NativeCatalog:
    """Lists one complete native checkpoint for whichever attempt is asked about."""

    def __init__(self, compatibility_key: str = TAG) -> None:
        self.compatibility_key = compatibility_key

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
                compatibility_key=self.compatibility_key,
                harness="claude",
                native=True,
                native_session_id=SESSION,
                watermark=10,
                complete=True,
                created_at="2026-11-30T08:00:00Z",
            )
        ]


def swarm_spec(seats: int, interval: float = 2.0) -> dict[str, Any]:
    return {
        "image": f"ghcr.io/agentihooks/worker:{TAG}",
        "harness": {"name": "claude", "command": ["claude"]},
        "seats": [
            {"name": f"s-{i}", "project": "github.com/acme/app", "task": {"id": f"t-{i}", "text": "x"}}
            for i in range(seats)
        ],
        "recovery": {"automation": True, "passIntervalSeconds": interval},
    }


def restricted_pod(name: str, namespace: str) -> dict[str, Any]:
    """A Pod the ``restricted`` Pod Security level admits (never scheduled: nothing runs it)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "probe",
                    "image": "registry.example/probe:1",
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
        },
    }


class BenchKubelet(RealKubelet):
    """The simulated kubelet without its polling reaper (``PodWatch`` finishes deletions instead)."""

    def __init__(self, cluster: RealCluster) -> None:
        super().__init__(cluster.plane, cluster.namespace)
        self._reaper.cancel()

    async def finish_deletion(self, pod: dict[str, Any]) -> None:
        """What a kubelet does with a Pod being deleted on its live Node: stop it, then remove it."""
        await asyncio.sleep(self.stop_seconds)
        with contextlib.suppress(httpx.HTTPError):
            await self._stopped(pod)
            await self._http.request(
                "DELETE",
                self._pod_path(pod["metadata"]["name"]),
                json={"gracePeriodSeconds": 0, "preconditions": {"uid": pod["metadata"]["uid"]}},
            )


@dataclass
class Added:
    at: float  # time.perf_counter() when the ADDED event arrived in this process
    swarm: str
    seat: str
    generation: int


@dataclass
class PodWatch:
    """One watch on the namespace's Pods: ADDED arrival times, the live Pods, deletions finished."""

    cluster: RealCluster
    kubelet: BenchKubelet
    added: dict[str, Added] = field(default_factory=dict)
    #: Every Pod's first ADDED event, by name (the peers' Pods too: :mod:`peers`).
    arrived: dict[str, float] = field(default_factory=dict)
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    _task: asyncio.Task[None] | None = None
    _finishing: set[str] = field(default_factory=set)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def start(self) -> None:
        r = await self.cluster.http.get(f"/api/v1/namespaces/{self.cluster.namespace}/pods")
        r.raise_for_status()
        doc = r.json()
        for pod in doc["items"]:
            self.pods[pod["metadata"]["name"]] = pod
        self._task = asyncio.create_task(self._run(doc["metadata"]["resourceVersion"]))

    async def close(self) -> None:
        for task in [self._task, *self._tasks]:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def _run(self, version: str) -> None:
        path = f"/api/v1/namespaces/{self.cluster.namespace}/pods"
        async with httpx.AsyncClient(
            base_url=self.cluster.url, verify=self.cluster.plane.tls(), timeout=None
        ) as http:
            while True:  # the server ends a watch after a while; go on from the last version seen
                params = {"watch": "true", "resourceVersion": version, "allowWatchBookmarks": "true"}
                async with http.stream("GET", path, params=params) as stream:
                    async for line in stream.aiter_lines():
                        if not line.strip():
                            continue
                        arrived = time.perf_counter()
                        event = json.loads(line)
                        obj = event.get("object") or {}
                        meta = obj.get("metadata") or {}
                        version = meta.get("resourceVersion") or version
                        if event.get("type") == "ERROR":
                            raise RuntimeError(f"the Pod watch failed: {obj}")
                        if event.get("type") == "BOOKMARK":
                            continue
                        self._seen(event["type"], obj, meta, arrived)

    def _seen(self, kind: str, pod: dict[str, Any], meta: dict[str, Any], arrived: float) -> None:
        name = meta["name"]
        if kind == "DELETED":
            self.pods.pop(name, None)
            return
        self.pods[name] = pod
        if kind == "ADDED":
            self.arrived.setdefault(name, arrived)
        annotations = meta.get("annotations") or {}
        if kind == "ADDED" and SEAT in annotations and name not in self.added:
            labels = meta.get("labels") or {}
            self.added[name] = Added(arrived, labels.get(SWARM, ""), annotations[SEAT], int(labels[GEN]))
        node = (pod.get("spec") or {}).get("nodeName")
        if meta.get("deletionTimestamp") and node == NODE and name not in self._finishing:
            self._finishing.add(name)
            task = asyncio.create_task(self.kubelet.finish_deletion(pod))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def newest(self, swarm: str) -> dict[str, dict[str, Any]]:
        """The newest live Pod of each seat of ``swarm``."""
        by_seat: dict[str, dict[str, Any]] = {}
        for pod in self.pods.values():
            meta = pod["metadata"]
            if (meta.get("labels") or {}).get(SWARM) != swarm:
                continue
            if meta.get("deletionTimestamp"):
                continue
            seat = meta["annotations"][SEAT]
            if seat not in by_seat or int(meta["labels"][GEN]) > int(
                by_seat[seat]["metadata"]["labels"][GEN]
            ):
                by_seat[seat] = pod
        return by_seat

    async def wait_newest(self, swarm: str, seats: int, generation: int, within: float) -> dict[str, Any]:
        """Every seat's Pod of ``generation`` exists (seen on the watch: no polling of the API server)."""
        deadline = time.monotonic() + within
        while True:
            found = self.newest(swarm)
            if len(found) == seats and all(
                int(p["metadata"]["labels"][GEN]) >= generation for p in found.values()
            ):
                return found
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{swarm}: {len(found)} of {seats} seats have a Pod of generation {generation}"
                )
            await asyncio.sleep(0.05)


class StatusProbe:
    """The bare baseline: one Pod status patch, until the watch event it produces arrives."""

    NAME = "bench-probe"

    def __init__(self, cluster: RealCluster) -> None:
        self.cluster = cluster
        self.path = f"/api/v1/namespaces/{cluster.namespace}/pods/{self.NAME}"
        self.count = 0

    async def create(self) -> None:
        r = await self.cluster.http.post(
            f"/api/v1/namespaces/{self.cluster.namespace}/pods",
            json=restricted_pod(self.NAME, self.cluster.namespace),
        )
        r.raise_for_status()

    async def measure(self, samples: int) -> list[float]:
        """``samples`` round trips. The watch starts from the collection's current resourceVersion
        (a list's), never from the Pod's own: after minutes without a change the server has compacted
        that one and answers 410. A watch the server ends or expires anyway is reopened from a fresh
        list, and the sample it cut short is taken again."""
        out: list[float] = []
        async with httpx.AsyncClient(
            base_url=self.cluster.url, verify=self.cluster.plane.tls(), timeout=None
        ) as watcher:
            for _ in range(3 * samples):
                if len(out) == samples:
                    break
                await self._watch(watcher, samples - len(out), out)
        if len(out) < samples:
            raise RuntimeError(f"status probe: {len(out)} of {samples} samples (its watch kept ending)")
        return out

    async def _watch(self, watcher: httpx.AsyncClient, samples: int, out: list[float]) -> None:
        """Takes up to ``samples`` round trips on one watch; returns early when the watch ends."""
        pods = f"/api/v1/namespaces/{self.cluster.namespace}/pods"
        selector = f"metadata.name={self.NAME}"
        listed = await self.cluster.http.get(pods, params={"fieldSelector": selector})
        listed.raise_for_status()
        params = {
            "watch": "true",
            "fieldSelector": selector,
            "resourceVersion": listed.json()["metadata"]["resourceVersion"],
        }
        async with watcher.stream("GET", pods, params=params) as stream:
            stream.raise_for_status()
            lines = stream.aiter_lines()
            for _ in range(samples):
                self.count += 1
                message = f"probe-{self.count}"
                t0 = time.perf_counter()
                r = await self.cluster.http.patch(
                    self.path + "/status", json={"status": {"message": message}}, headers=MERGE
                )
                r.raise_for_status()
                if not await self._seen(lines, message):
                    return  # the watch ended (or expired: an ERROR event) before the patch showed
                out.append(time.perf_counter() - t0)

    @staticmethod
    async def _seen(lines: Any, message: str) -> bool:
        async for line in lines:
            if not line.strip():
                continue
            event = json.loads(line)
            if event.get("type") == "ERROR":
                return False
            if (event.get("object", {}).get("status") or {}).get("message") == message:
                return True
        return False


async def oom_bodies(http: httpx.AsyncClient, paths: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The OOMKilled status patch of each Pod at ``paths`` (by key), its containers named after the
    Pod's own: the kill every benchmark sends, built before the clock starts."""
    from testsupport import kubelet as kl
    from testsupport.node import _named_after

    keys = list(paths)
    current = await asyncio.gather(*(http.get(paths[k]) for k in keys))
    return {
        k: {
            "status": {f: None for f in ("reason", "message", "containerStatuses", "conditions")}
            | _named_after(r.raise_for_status().json(), kl.oom_killed())
        }
        for k, r in zip(keys, current, strict=True)
    }


async def object_count(cluster: RealCluster) -> int:
    """Objects stored in the benchmark's namespace (Pods, Secrets, ConfigMaps, Events, Swarms)."""
    total = 0
    ns = cluster.namespace
    for path in (
        f"/api/v1/namespaces/{ns}/pods",
        f"/api/v1/namespaces/{ns}/secrets",
        f"/api/v1/namespaces/{ns}/configmaps",
        f"/api/v1/namespaces/{ns}/events",
        f"/apis/agentihooks.io/v1alpha1/namespaces/{ns}/swarms",
    ):
        r = await cluster.http.get(path)
        r.raise_for_status()
        total += len(r.json()["items"])
    return total


def remove(work: Path) -> None:
    shutil.rmtree(work, ignore_errors=True)


def run_on_real_node(measure: Any, args: Any, prefix: str) -> None:
    """What a real-node benchmark's ``main`` does: exit 2 naming why where no real node can run here,
    else ``asyncio.run(measure(args, work))`` in a fresh work folder, removed unless ``args.keep``."""
    import shutil
    import tempfile

    from testsupport.realnode import why_not

    reason = why_not()
    if reason is not None:
        print(f"error: this machine cannot host a real node: {reason}", file=sys.stderr)
        raise SystemExit(2)
    work = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        asyncio.run(measure(args, work))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
