"""The systems the product is measured beside in ``bench/failover.py`` (issue 28.4), on its API server.

* **The Job controller** (the peer): an Indexed Job of N completions in the
  same kube-controller-manager, ``podReplacementPolicy: Failed`` and a
  ``podFailurePolicy`` that counts exit code 137, so each OOM-killed index gets
  one replacement Pod. Its Pods are bound and started by the same simulated
  kubelet as the product's, and killed with the same OOMKilled status.
* **The floor of the product's writes** (``writes="product"``): a bare client
  that holds its own watch on its Pods and, from the event that shows a Pod
  OOM-killed, sends at once what the product sends for one failure: create the
  attempt's Secret (a token and a launch record of the product's size) and the
  replacement Pod, and delete the failed Pod. No Redis, no decision, no journal: what is left of the product's
  latency once its own bookkeeping is gone.
* **The floor of one Pod create** (``writes="pod"``): the same client sending
  only the replacement Pod's create; what no recovery can beat on this API
  server.

Every system's clock is the one of the product: from its kill (the status
patch) sent to its replacement's ADDED event on the benchmark's Pod watch
(:class:`realplane.PodWatch`, which notes every Pod's arrival).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
from realplane import MERGE, oom_bodies, restricted_pod
from testsupport.realcluster import RealCluster

#: Labels of the floors' Pods: which floor, which of its seats, which generation.
FLOOR = "bench.agentihooks.io/floor"
INDEX = "bench.agentihooks.io/index"
GENERATION = "bench.agentihooks.io/generation"
JOB_INDEX = "batch.kubernetes.io/job-completion-index"

Writes = Literal["product", "pod"]
#: A launch record of the size the product writes for the benchmark's seats (about 470 bytes of JSON).
LAUNCH_RECORD = json.dumps({"schema_version": 1, "padding": "x" * 430})


def floor_pod(namespace: str, system: str, index: int, generation: int) -> dict[str, Any]:
    pod = restricted_pod(f"{system}-{index}-g{generation}", namespace)
    pod["metadata"]["labels"] = {FLOOR: system, INDEX: str(index), GENERATION: str(generation)}
    pod["spec"]["restartPolicy"] = "Never"
    return pod


def oom_killed(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    for c in status.get("containerStatuses") or []:
        term = (c.get("state") or {}).get("terminated") or {}
        if term.get("exitCode") == 137:
            return True
    return False


@dataclass
class Floor:
    """A bare client replacing its OOM-killed Pods from its own watch, with ``writes`` per failure."""

    cluster: RealCluster
    system: str
    writes: Writes
    handled: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None
    _sends: set[asyncio.Task[None]] = field(default_factory=set)
    _http: httpx.AsyncClient | None = None

    async def start(self) -> None:
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
        self._http = httpx.AsyncClient(
            base_url=self.cluster.url,
            verify=self.cluster.plane.tls(),
            headers={"Authorization": f"Bearer {self.cluster.token}"} if self.cluster.token else {},
            timeout=30,
            limits=limits,
        )
        ready = asyncio.Event()
        self._task = asyncio.create_task(self._watch(ready))
        await asyncio.wait_for(ready.wait(), 30)

    async def close(self) -> None:
        for task in [self._task, *self._sends]:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if self._http is not None:
            await self._http.aclose()

    async def create_first(self, seats: int) -> None:
        assert self._http is not None
        ns = self.cluster.namespace
        answers = await asyncio.gather(
            *(
                self._http.post(f"/api/v1/namespaces/{ns}/pods", json=floor_pod(ns, self.system, i, 1))
                for i in range(seats)
            )
        )
        for r in answers:
            r.raise_for_status()

    async def _watch(self, ready: asyncio.Event) -> None:
        assert self._http is not None
        path = f"/api/v1/namespaces/{self.cluster.namespace}/pods"
        selector = f"{FLOOR}={self.system}"
        version = await self._list(path, selector)
        ready.set()
        while True:  # a watch the server ends, cuts or expires is opened again where it was
            params = {"watch": "true", "labelSelector": selector, "resourceVersion": version}
            try:
                async with self._http.stream("GET", path, params=params, timeout=None) as stream:
                    async for line in stream.aiter_lines():
                        if not line.strip():
                            continue
                        event = json.loads(line)
                        pod = event.get("object") or {}
                        if event.get("type") == "ERROR":  # 410: the version was compacted
                            version = await self._list(path, selector)
                            break
                        version = (pod.get("metadata") or {}).get("resourceVersion") or version
                        if event.get("type") == "MODIFIED":
                            self._seen(pod)
            except httpx.HTTPError:
                await asyncio.sleep(0.1)

    async def _list(self, path: str, selector: str) -> str:
        """The floor's Pods as listed now (a kill missed while no watch was open is taken from them)."""
        assert self._http is not None
        listed = await self._http.get(path, params={"labelSelector": selector})
        listed.raise_for_status()
        for pod in listed.json()["items"]:
            self._seen(pod)
        return str(listed.json()["metadata"]["resourceVersion"])

    def _seen(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        if meta["name"] in self.handled or meta.get("deletionTimestamp") or not oom_killed(pod):
            return
        self.handled.add(meta["name"])
        task = asyncio.create_task(self._replace(pod))
        self._sends.add(task)
        task.add_done_callback(self._sends.discard)

    async def _replace(self, failed: dict[str, Any]) -> None:
        """The writes of one failure, all sent at once (as the product sends its launch)."""
        assert self._http is not None
        ns = self.cluster.namespace
        labels = failed["metadata"]["labels"]
        index, generation = int(labels[INDEX]), int(labels[GENERATION]) + 1
        pod = floor_pod(ns, self.system, index, generation)
        name = pod["metadata"]["name"]
        calls = [self._http.post(f"/api/v1/namespaces/{ns}/pods", json=pod)]
        if self.writes == "product":
            meta = {"name": name, "namespace": ns, "labels": {FLOOR: self.system}}
            data = {"token": "x" * 43, "launch.json": LAUNCH_RECORD}
            secret = {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "stringData": data}
            calls += [
                self._http.post(f"/api/v1/namespaces/{ns}/secrets", json=secret),
                self._http.delete(f"/api/v1/namespaces/{ns}/pods/{failed['metadata']['name']}"),
            ]
        for r in await asyncio.gather(*calls, return_exceptions=True):
            if isinstance(r, BaseException):
                self.errors.append(f"{self.system}: {type(r).__name__}: {r}")
            elif r.status_code >= 300:
                self.errors.append(f"{self.system}: {r.request.method} {r.request.url.path}: {r.status_code}")


def job(namespace: str, name: str, completions: int) -> dict[str, Any]:
    """An Indexed Job whose OOM-killed indexes are each replaced once (the Job controller's best case)."""
    template = restricted_pod("unused", namespace)
    template["metadata"] = {"labels": {FLOOR: name}}
    template["spec"]["restartPolicy"] = "Never"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "completionMode": "Indexed",
            "completions": completions,
            "parallelism": completions,
            "backoffLimitPerIndex": 3,
            "podReplacementPolicy": "Failed",
            "podFailurePolicy": {
                "rules": [{"action": "Count", "onExitCodes": {"operator": "In", "values": [137]}}]
            },
            "template": template,
        },
    }


async def create_job(cluster: RealCluster, name: str, completions: int) -> None:
    r = await cluster.http.post(
        f"/apis/batch/v1/namespaces/{cluster.namespace}/jobs", json=job(cluster.namespace, name, completions)
    )
    r.raise_for_status()


async def delete_job(cluster: RealCluster, name: str) -> None:
    with contextlib.suppress(httpx.HTTPError):
        await cluster.http.delete(
            f"/apis/batch/v1/namespaces/{cluster.namespace}/jobs/{name}",
            params={"propagationPolicy": "Background"},
        )


# -- rounds: each system's Pods made running, killed at once, their replacements awaited -----------
@dataclass
class Victim:
    key: str
    pod: dict[str, Any]
    #: The name of its replacement once the watch has seen it, else ``None``.
    find: Any


async def make_running(kubelet: Any, names: list[str], node: str) -> None:
    from testsupport import kubelet as kl

    gate = asyncio.Semaphore(8)

    async def start(name: str) -> None:
        async with gate:
            await kubelet.set_status(name, kl.running(), node_name=node)

    await asyncio.gather(*(start(n) for n in names))


async def kill_and_wait(
    cluster: RealCluster, watch: Any, victims: list[Victim], within: float
) -> list[float]:
    """Kill every victim at once (the same OOMKilled status patch as the product's); each one's time
    from its kill sent to its replacement's ADDED event on ``watch``, or ``within`` for a replacement
    not seen by then (so a p99 that equals the wait means some were later still)."""
    started: dict[str, float] = {}
    n = len(victims)
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
    async with httpx.AsyncClient(
        base_url=cluster.url, verify=cluster.plane.tls(), timeout=30, limits=limits
    ) as http:
        paths = {
            v.key: f"/api/v1/namespaces/{cluster.namespace}/pods/{v.pod['metadata']['name']}" for v in victims
        }
        bodies = await oom_bodies(http, paths)

        async def kill(key: str) -> None:
            started[key] = time.perf_counter()
            r = await http.patch(paths[key] + "/status", json=bodies[key], headers=MERGE)
            r.raise_for_status()

        await asyncio.gather(*(kill(v.key) for v in victims))
    deadline = time.monotonic() + within
    while True:
        found = {v.key: v.find() for v in victims}
        if all(found.values()) or time.monotonic() > deadline:
            # A replacement not seen in time counts as the bound itself (a lower bound of its time).
            return [watch.arrived[f] - started[k] if f else within for k, f in found.items()]
        await asyncio.sleep(0.02)


async def wait_until(check: Any, what: str, within: float) -> Any:
    deadline = time.monotonic() + within
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {within:.0f} s: {what}")
        await asyncio.sleep(0.05)


@dataclass
class FloorGroup:
    """``count`` floors of ``seats`` Pods each, all of one kind of ``writes``; their round is one kill
    of all their Pods at once."""

    cluster: RealCluster
    kubelet: Any
    watch: Any
    label: str
    writes: Writes
    count: int
    seats: int
    node: str
    floors: list[Floor] = field(default_factory=list)
    generation: int = 1

    async def start(self, within: float) -> None:
        for i in range(self.count):
            floor = Floor(self.cluster, f"{self.label}-{i}", self.writes)
            await floor.start()
            self.floors.append(floor)
            await floor.create_first(self.seats)
        await self._running(within)

    def _name(self, floor: Floor, index: int, generation: int) -> str:
        return f"{floor.system}-{index}-g{generation}"

    async def _running(self, within: float) -> None:
        names = [self._name(f, i, self.generation) for f in self.floors for i in range(self.seats)]
        await wait_until(lambda: all(n in self.watch.pods for n in names), f"{self.label}'s Pods", within)
        await make_running(self.kubelet, names, self.node)

    async def round(self, settle: float, within: float) -> list[float]:
        await asyncio.sleep(settle)
        g = self.generation
        victims = [
            Victim(
                key=f"{f.system}/{i}",
                pod=self.watch.pods[self._name(f, i, g)],
                find=lambda f=f, i=i: (
                    self._name(f, i, g + 1) if self._name(f, i, g + 1) in self.watch.arrived else None
                ),
            )
            for f in self.floors
            for i in range(self.seats)
        ]
        out = await kill_and_wait(self.cluster, self.watch, victims, within)
        errors = [e for f in self.floors for e in f.errors]
        if errors:
            raise RuntimeError(f"{self.label}: {errors[:3]}")
        self.generation = g + 1
        await self._running(within)
        return out

    async def close(self) -> None:
        for floor in self.floors:
            await floor.close()


async def job_round(
    cluster: RealCluster,
    kubelet: Any,
    watch: Any,
    label: str,
    count: int,
    seats: int,
    node: str,
    settle: float,
    within: float,
) -> list[float]:
    """``count`` Indexed Jobs of ``seats`` completions, every Pod OOM-killed at once; each index's time
    to the ADDED event of the Pod the Job controller makes in its place."""
    names = [f"{label}-{i}" for i in range(count)]
    for name in names:
        await create_job(cluster, name, seats)

    def firsts() -> dict[str, dict[str, Any]] | None:
        out = {}
        for pod in list(watch.pods.values()):
            labels = pod["metadata"].get("labels") or {}
            if labels.get("job-name") in names:
                out.setdefault(f"{labels['job-name']}/{labels[JOB_INDEX]}", pod)
        return out if len(out) == count * seats else None

    first = await wait_until(firsts, f"{label}'s Pods", within)
    await make_running(kubelet, [p["metadata"]["name"] for p in first.values()], node)
    await asyncio.sleep(settle)

    def replacement(key: str) -> str | None:
        job_name, index = key.split("/")
        for name, pod in list(watch.pods.items()):
            labels = pod["metadata"].get("labels") or {}
            if (
                labels.get("job-name") == job_name
                and labels.get(JOB_INDEX) == index
                and name != first[key]["metadata"]["name"]
                and name in watch.arrived
            ):
                return name
        return None

    victims = [Victim(key, pod, lambda key=key: replacement(key)) for key, pod in first.items()]
    try:
        return await kill_and_wait(cluster, watch, victims, within)
    finally:
        for name in names:
            await delete_job(cluster, name)
