"""A simulated kubelet: turns the operator's Pods into real ``agentihooks-worker boot`` processes.

It watches (polls) the Kubernetes API for Pods in its namespace. For each new
Pod it reads the launch record from the Pod's ConfigMap and the worker
credential from its Secret, exactly as the volume mount and ``secretKeyRef``
would hand them over, starts the worker as a real process in its own process
group, and writes the Pod status a kubelet would: ``Running``, then
``terminated`` with the real exit code when the process ends (``OOMKilled``
when the demo injects an out-of-memory kill), or a ``waiting`` image-pull
state when the demo injects a pull failure. A Pod the operator deletes has its
process group stopped. Nothing here is a real kubelet, and it says so.

What differs between APIs sits behind a :class:`PodApi`: :class:`EmulatedApi`
for kmock's emulator (a Node object, ``spec.nodeName`` patched, deleted Pods
vanish at once) and :class:`agentihooks_demo.node.RealApi` for a real API
server (a Node whose Lease is renewed, the binding subresource, statuses named
after the Pod's containers, graceful deletions finished by this kubelet).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx

from . import podstatus
from .containers import CONTAINER_ENV, kill_container, reap, secret_value
from .node import MERGE, mounts_missing, named_after, patch_status
from .procs import signal_group

DOMAIN = "swarm.agentihooks.io"


@dataclass
class PodRun:
    """One Pod this kubelet has seen, and its worker process (if it was started)."""

    name: str
    seat: str
    generation: int
    execution_id: str
    image: str
    dir: Path
    proc: asyncio.subprocess.Process | None = None
    started: str = ""
    oom: bool = False
    exit_code: int | None = None
    reported: bool = False
    deleted: bool = False
    stopping: asyncio.Future[None] | None = None
    #: A held start (see ``SimulatedKubelet.gate``), while it waits.
    waiting: asyncio.Future[None] | None = None

    @property
    def log(self) -> Path:
        return self.dir / "worker.log"

    def events(self) -> list[dict[str, Any]]:
        """The worker's JSON event lines (``restore_verified``, ``restore_refused``, ...)."""
        if not self.log.exists():
            return []
        out = []
        for raw in self.log.read_text(errors="replace").splitlines():
            line = raw.strip()
            if line.startswith("{") and '"event"' in line:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
        return out

    def event(self, name: str) -> dict[str, Any] | None:
        return next((e for e in self.events() if e.get("event") == name), None)


#: Per-Pod instructions: "hold" leaves it Pending; a dict of env adds harness settings for its worker.
Plan = Callable[[PodRun], "str | dict[str, str]"]


class PodApi(Protocol):
    """The Kubernetes API as this kubelet uses it (reads go through ``http`` in ``namespace``)."""

    http: httpx.AsyncClient
    namespace: str
    description: str

    async def start(self, on_delete: Callable[[str], Awaitable[None]]) -> None:
        """Register the node; ``on_delete(pod name)`` stops a deleted Pod's container where the API
        waits for its kubelet to finish a deletion."""

    async def bind(self, pod: dict[str, Any]) -> None:
        """Place the Pod on this kubelet's node (there is no scheduler)."""

    def creatable(self, metadata: dict[str, Any]) -> dict[str, Any]:
        """``metadata`` of an object to create, with what the API does not fill in itself."""

    async def close(self) -> None: ...


class EmulatedApi:
    """kmock's emulator: no scheduler, no binding subresource, no graceful deletion (a deleted Pod is
    gone at once), and no uid or resourceVersion unless the client sends them."""

    description = "embedded emulator (kmock)"

    def __init__(self, url: str, namespace: str = "default") -> None:
        self.http = httpx.AsyncClient(base_url=url, timeout=10)
        self.namespace = namespace

    async def start(self, on_delete: Callable[[str], Awaitable[None]]) -> None:
        r = await self.http.post("/api/v1/nodes", json=podstatus.node())
        if r.status_code not in (200, 201, 409):
            r.raise_for_status()

    async def bind(self, pod: dict[str, Any]) -> None:
        path = f"/api/v1/namespaces/{self.namespace}/pods/{pod['metadata']['name']}"
        r = await self.http.patch(path, json={"spec": {"nodeName": podstatus.NODE}}, headers=MERGE)
        r.raise_for_status()

    def creatable(self, metadata: dict[str, Any]) -> dict[str, Any]:
        return {**metadata, "uid": str(uuid.uuid4()), "resourceVersion": "1"}

    async def close(self) -> None:
        await self.http.aclose()


#: A plan's key (never passed on as a variable): this run's worker is of an earlier release, which keeps
#: the credential its Pod started with (no ``credential_exchange``), as a case that posts as the worker
#: needs.
EARLIER_WORKER = "AGENTIHOOKS_DEMO_EARLIER_WORKER"


@dataclass
class SimulatedKubelet:
    api: PodApi
    workdir: Path
    base_env: dict[str, str]
    plan: Plan = field(default=lambda run: {})
    say: Callable[[str], None] = print
    pods: dict[str, PodRun] = field(default_factory=dict)
    #: (seat, generation) whose container starts only once its event is set (:meth:`gate`).
    gates: dict[tuple[str, int], asyncio.Event] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.http = self.api.http
        self.namespace = self.api.namespace
        self._task: asyncio.Task[None] | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        await self.api.start(self._pod_deleted)
        self.say(
            f"[kubelet] SIMULATED kubelet ({self.api.description}): worker Pods run as local processes "
            f"on node '{podstatus.NODE}'"
        )
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        """Stop syncing, then every container at once (each worker drains in parallel, as on a node
        shutting down: one after another, a few slow drains added up past a minute)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(self._task, 10)
        await asyncio.gather(
            *(self._stop_process(run, signal.SIGTERM) for run in list(self.pods.values())),
            return_exceptions=True,
        )
        await self.api.close()

    async def _loop(self) -> None:
        while True:
            try:
                await self.sync()
            except httpx.HTTPError as e:
                self.say(f"[kubelet] API unreachable ({type(e).__name__}); retrying")
            await asyncio.sleep(0.2)

    # -- one sync --------------------------------------------------------------------------------
    async def sync(self) -> None:
        r = await self.http.get(f"/api/v1/namespaces/{self.namespace}/pods")
        r.raise_for_status()
        present = {p["metadata"]["name"]: p for p in r.json()["items"]}
        for name, pod in present.items():
            meta = pod["metadata"]
            if (
                name not in self.pods
                and meta.get("labels", {}).get(f"{DOMAIN}/execution-id")
                and not meta.get("deletionTimestamp")
            ):
                await self._admit(pod)
        for name, run in list(self.pods.items()):
            if name not in present or present[name]["metadata"].get("deletionTimestamp"):
                await self._deleted(run)
            elif run.proc is not None and run.proc.returncode is not None and not run.reported:
                run.exit_code = run.proc.returncode
                await self._report_exit(run)

    async def _deleted(self, run: PodRun) -> None:
        """The Pod is gone or being deleted: stop its container once (SIGTERM, then what it left)."""
        if run.stopping is None:
            run.deleted = True
            run.stopping = asyncio.ensure_future(self._stop_process(run, signal.SIGTERM))
        await asyncio.shield(run.stopping)

    async def _pod_deleted(self, name: str) -> None:
        run = self.pods.get(name)
        if run is not None:
            await self._deleted(run)

    async def _admit(self, pod: dict[str, Any]) -> None:
        if await mounts_missing(self.http, self.namespace, pod):
            return  # ContainerCreating, as a real kubelet: a later sync starts it once they exist
        meta = pod["metadata"]
        labels = meta.get("labels") or {}
        annotations = meta.get("annotations") or {}
        eid = labels[f"{DOMAIN}/execution-id"]
        run = PodRun(
            name=meta["name"],
            seat=annotations.get(f"{DOMAIN}/seat", "?"),
            generation=int(labels.get(f"{DOMAIN}/generation", "0")),
            execution_id=eid,
            image=pod["spec"]["containers"][0]["image"],
            dir=self.workdir / "pods" / meta["name"],
        )
        self.pods[run.name] = run
        run.dir.mkdir(parents=True, exist_ok=True)
        gate = self.gates.get((run.seat, run.generation))
        if gate is not None and not gate.is_set():
            self.say(f"[kubelet] {run.seat} gen {run.generation}: Pod {run.name} waits before it starts")
            run.waiting = asyncio.ensure_future(self._start_when(gate, run, pod))
            return
        await self._start(run, pod)

    def gate(self, seat: str, generation: int) -> asyncio.Event:
        """Hold that seat's generation before its container starts, until the event is set (a case
        changes what the replacement will find, after the controller admitted it)."""
        return self.gates.setdefault((seat, generation), asyncio.Event())

    async def _start_when(self, gate: asyncio.Event, run: PodRun, pod: dict[str, Any]) -> None:
        await gate.wait()
        if not run.deleted:
            await self._start(run, pod)

    async def _start(self, run: PodRun, pod: dict[str, Any]) -> None:
        instruction = self.plan(run)
        if instruction == "hold":
            self.say(f"[kubelet] {run.seat} gen {run.generation}: Pod {run.name} stays Pending")
            return
        extra = instruction if isinstance(instruction, dict) else {}
        await self._run_worker(run, pod, extra)

    async def _read(self, resource: str, name: str) -> dict[str, Any]:
        r = await self.http.get(f"/api/v1/namespaces/{self.namespace}/{resource}/{name}")
        r.raise_for_status()
        return dict(r.json())

    async def _launch_files(self, volume: dict[str, Any]) -> dict[str, str]:
        """The launch volume's files as the kubelet would project them: the listed keys of the
        attempt's Secret, or (attempts of an earlier release) every key of its launch ConfigMap."""
        if "secret" in volume:
            secret = await self._read("secrets", volume["secret"]["secretName"])
            items = volume["secret"].get("items") or [{"key": k, "path": k} for k in secret.get("data") or {}]
            return {item["path"]: secret_value(secret, item["key"]) for item in items}
        configmap = await self._read("configmaps", volume["configMap"]["name"])
        return dict(configmap.get("data") or {})

    async def _run_worker(self, run: PodRun, pod: dict[str, Any], extra: dict[str, str]) -> None:
        container = pod["spec"]["containers"][0]
        volume = next(v for v in pod["spec"].get("volumes", []) if v["name"] == "launch")
        mount = next(m for m in container.get("volumeMounts", []) if m["name"] == volume["name"])
        mounted = run.dir / "launch"
        mounted.mkdir(exist_ok=True)
        earlier = extra.pop(EARLIER_WORKER, None) is not None
        for path, text in (await self._launch_files(volume)).items():
            content = text
            if earlier and path == "launch.json":  # a worker of an earlier release: it keeps the Pod's token
                record = json.loads(text)
                record.pop("credential_exchange", None)
                content = json.dumps(record)
            (mounted / path).write_text(content)
        env = dict(self.base_env)
        for item in container.get("env", []):
            if "value" in item:
                value = str(item["value"])
                if value.startswith(mount["mountPath"] + "/"):
                    value = str(mounted / value[len(mount["mountPath"]) + 1 :])
                env[item["name"]] = value
            elif "secretKeyRef" in (item.get("valueFrom") or {}):
                ref = item["valueFrom"]["secretKeyRef"]
                secret = await self._read("secrets", ref["name"])
                env[item["name"]] = secret_value(secret, ref["key"])
        env.update(extra)
        env[CONTAINER_ENV] = run.name  # every process of this "container" carries it (see container_pids)
        log = run.log.open("ab")
        run.proc = await asyncio.create_subprocess_exec(
            "agentihooks-worker",
            "boot",
            env=env,
            cwd=run.dir,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=log,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        run.started = podstatus.ts()
        await self.set_status(run, podstatus.running(run.image, run.started), node=True)
        self.say(
            f"[kubelet] {run.seat} gen {run.generation}: started agentihooks-worker boot (pid {run.proc.pid})"
        )

    async def set_status(self, run: PodRun, status: dict[str, Any], *, node: bool = False) -> None:
        """Write the Pod's status (placing it on the node first with ``node``), its container entries
        named after the Pod's own containers. A Pod already gone is no error."""
        path = f"/api/v1/namespaces/{self.namespace}/pods/{run.name}"
        r = await self.http.get(path)
        if r.status_code == 404:
            return
        r.raise_for_status()
        pod = r.json()
        if node and not pod["spec"].get("nodeName"):
            await self.api.bind(pod)
        r = await patch_status(self.http, path, named_after(pod, status))
        if r.status_code != 404:
            r.raise_for_status()

    async def _report_exit(self, run: PodRun) -> None:
        run.reported = True
        code = 137 if run.oom else int(run.exit_code or 0)
        if run.exit_code is not None and run.exit_code < 0 and not run.oom:
            code = 128 - run.exit_code
        if run.deleted:
            return
        await self.set_status(run, podstatus.terminated(run.image, code, run.started, oom=run.oom))
        what = "OOMKilled" if run.oom else f"exited {code}"
        self.say(f"[kubelet] {run.seat} gen {run.generation}: container {what}")

    async def _stop_process(self, run: PodRun, sig: int) -> None:
        """Stop the container: ``sig`` to the worker's group, then SIGKILL to every process it left."""
        if run.proc is not None and run.proc.returncode is None:
            signal_group(run.proc.pid, sig)
            try:
                await asyncio.wait_for(run.proc.wait(), 10)
            except TimeoutError:
                signal_group(run.proc.pid, signal.SIGKILL)
                await run.proc.wait()
        if sig == signal.SIGKILL:
            await asyncio.to_thread(
                kill_container, run.name
            )  # an OOM kill takes the whole cgroup, harness included
        else:
            await asyncio.to_thread(reap, run.name)

    # -- injected faults -------------------------------------------------------------------------
    async def oom_kill(self, run: PodRun, *, report: bool = True) -> None:
        """The node runs out of memory: SIGKILL the container's processes; report ``OOMKilled``.

        With ``report=False`` the status is held back until :meth:`report_exit` (a slow kubelet),
        so a story can act between the kill and the moment the operator sees it.
        """
        run.oom = True
        run.reported = not report
        await self._stop_process(run, signal.SIGKILL)
        if not report and run.proc is not None:
            run.exit_code = run.proc.returncode

    async def report_exit(self, run: PodRun) -> None:
        await self._report_exit(run)

    async def image_pull_failure(self, run: PodRun) -> None:
        """Stop the container and report its image as unpullable (a re-created container whose pull fails)."""
        run.reported = True
        await self._stop_process(run, signal.SIGTERM)
        await self.set_status(run, podstatus.pull_failure(run.image))

    async def fail_pending(self, run: PodRun, exit_code: int) -> None:
        """Give up on a held Pod: report it Failed without its container ever running."""
        run.reported = True
        await self.set_status(run, podstatus.never_started(run.image, exit_code), node=True)

    def runs(self, seat: str) -> list[PodRun]:
        return sorted((r for r in self.pods.values() if r.seat == seat), key=lambda r: r.generation)
