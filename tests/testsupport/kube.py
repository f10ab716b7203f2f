"""A Kubernetes API for tests: kmock's KubernetesEmulator served over HTTP on 127.0.0.1.

Declares every resource the operator touches (kmock serves only declared
ones; the list and the kubeconfig writer are the demo's own,
:mod:`agentihooks_demo.emulator`, so the two emulated clusters match), writes
a kubeconfig that points at it (the operator logs in exactly as
it would against a cluster), and records the verb and resource of every call
the operator made (told apart from the test's own calls by User-Agent), which
is what the Helm chart's RBAC is compared against.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import kmock
from agentihooks_demo.emulator import declare, write_kubeconfig

OPERATOR_AGENTS = ("kopf/", "agentihooks-operator")
SWARMS = "/apis/agentihooks.io/v1alpha1/namespaces/{ns}/swarms"
_VERB_OF_ACTION = {"list": "list", "watch": "watch", "fetch": "get", "create": "create", "delete": "delete"}


def kubeconfig(url: str, path: Path) -> Path:
    write_kubeconfig(url, path, name="kmock", token="test-token")
    return path


def api_call(request: Any) -> dict[str, str] | None:
    """``{"verb", "group", "resource"}`` of one recorded request (``None`` for discovery calls)."""
    if request.resource is None or request.resource.plural is None or request.action is None:
        return None
    action = str(request.action.value if hasattr(request.action, "value") else request.action).lower()
    method = str(request.method.value if hasattr(request.method, "value") else request.method).upper()
    verb = "patch" if action == "update" and method == "PATCH" else _VERB_OF_ACTION.get(action, action)
    if action == "update" and method == "PUT":
        verb = "update"
    resource = request.resource.plural + (f"/{request.subresource}" if request.subresource else "")
    return {"verb": verb, "group": request.resource.group or "", "resource": resource}


class Cluster:
    """The emulator, its URL, a kubeconfig, and helpers the tests use."""

    def __init__(self, emulator: kmock.KubernetesEmulator, url: str, config: Path) -> None:
        self.emulator = emulator
        self.url = url
        self.kubeconfig = config
        self.http = httpx.AsyncClient(base_url=url, timeout=10)

    # -- recording -------------------------------------------------------------------------------
    def operator_calls(self) -> set[tuple[str, str, str]]:
        calls: set[tuple[str, str, str]] = set()
        for request in list(self.emulator):
            agent = str(request.headers.get("User-Agent") or request.headers.get("user-agent") or "")
            if not agent.startswith(OPERATOR_AGENTS):
                continue
            call = api_call(request)
            if call is not None:
                calls.add((call["verb"], call["group"], call["resource"]))
        return calls

    def calls_by(self, agent: str) -> list[tuple[str, str, str]]:
        """Every call (verb, group, resource) whose User-Agent is exactly ``agent``."""
        out = []
        for request in list(self.emulator):
            call = api_call(request)
            if call is not None and str(request.headers.get("User-Agent") or "") == agent:
                out.append((call["verb"], call["group"], call["resource"]))
        return out

    def count(self, verb: str, resource: str, name_prefix: str = "") -> int:
        """How many operator calls of ``verb`` on ``resource`` (optionally for names starting so)."""
        n = 0
        for request in list(self.emulator):
            call = api_call(request)
            if call is None or call["verb"] != verb or call["resource"] != resource:
                continue
            agent = str(request.headers.get("User-Agent") or "")
            if agent.startswith(OPERATOR_AGENTS):
                body = request.data if isinstance(request.data, dict) else {}
                name = request.name or (body.get("metadata") or {}).get("name") or ""
                if name.startswith(name_prefix):
                    n += 1
        return n

    # -- objects ---------------------------------------------------------------------------------
    async def create_swarm(
        self, name: str, spec: dict[str, Any], namespace: str = "default"
    ) -> dict[str, Any]:
        body = {
            "apiVersion": "agentihooks.io/v1alpha1",
            "kind": "Swarm",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": str(uuid.uuid4()),
                "resourceVersion": "1",
            },
            "spec": spec,
        }
        r = await self.http.post(SWARMS.format(ns=namespace), json=body)
        r.raise_for_status()
        return dict(r.json())

    async def get(self, path: str) -> dict[str, Any] | None:
        r = await self.http.get(path)
        if r.status_code == 404:
            return None
        r.raise_for_status()
        return dict(r.json())

    async def swarm(self, name: str, namespace: str = "default") -> dict[str, Any]:
        found = await self.get(SWARMS.format(ns=namespace) + f"/{name}")
        assert found is not None
        return found

    async def items(self, resource: str, namespace: str = "default") -> list[dict[str, Any]]:
        r = await self.http.get(f"/api/v1/namespaces/{namespace}/{resource}")
        r.raise_for_status()
        return list(r.json()["items"])

    async def pods(self, swarm: str | None = None, namespace: str = "default") -> list[dict[str, Any]]:
        pods = await self.items("pods", namespace)
        if swarm is not None:
            pods = [
                p for p in pods if p["metadata"].get("labels", {}).get("swarm.agentihooks.io/swarm") == swarm
            ]
        return sorted(pods, key=lambda p: int(p["metadata"]["labels"]["swarm.agentihooks.io/generation"]))

    async def events(self, namespace: str = "default") -> list[dict[str, Any]]:
        return await self.items("events", namespace)


async def eventually(
    check: Callable[[], Any], *, timeout: float = 20.0, interval: float = 0.05, what: str = "condition"
) -> Any:
    """Await ``check()`` (sync or async) until it returns something truthy; fail after ``timeout``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(interval)


@contextlib.asynccontextmanager
async def emulated_cluster(
    workdir: Path, emulator: kmock.KubernetesEmulator | None = None
) -> AsyncIterator[Cluster]:
    emulator = emulator if emulator is not None else kmock.KubernetesEmulator()
    async with emulator, kmock.Server(emulator) as server:
        declare(emulator)
        url = str(server.url).rstrip("/")
        cluster = Cluster(emulator, url, kubeconfig(url, workdir / "kubeconfig"))
        try:
            yield cluster
        finally:
            await cluster.http.aclose()


@contextlib.asynccontextmanager
async def running_operator(
    cluster: Cluster,
    redis_url: str,
    *,
    operator_id: str = "op-a",
    clock: Callable[[], int] | None = None,
    faults: Any = None,
    catalog: Any = None,
    lease_ms: int = 3000,
    node_lost_after_seconds: float = 40.0,
    placement: bool = True,
    **settings: Any,
) -> AsyncIterator[Any]:
    """The real operator (kopf.operator with this package's handlers) in the test's event loop.

    ``placement=False`` turns the sharing of swarms among replicas off (whoever takes a lease keeps it).
    Further keyword arguments are operator settings (``OperatorConfig`` fields, e.g.
    ``worker_service_accounts``).
    """
    import os

    import kopf
    from agentihooks_operator.k8s import handlers  # noqa: F401  (registers the handlers)
    from agentihooks_operator.k8s.config import OperatorConfig

    previous = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = str(cluster.kubeconfig)  # read once, at the operator's login
    config = OperatorConfig(
        redis_url=redis_url,
        operator_id=operator_id,
        namespaces=getattr(cluster, "namespace", "default"),
        scan_namespaces=False,
        lease_ms=lease_ms,
        node_lost_after_seconds=node_lost_after_seconds,
        retry_delay_seconds=0.5,
        placement=placement,
        **settings,
    )
    memo = kopf.Memo(config=config, clock=clock, faults=faults)
    if catalog is not None:
        memo["catalog"] = catalog
    # Its own thread and event loop: kopf treats every task of its loop as its own at shutdown,
    # and the emulator's request handlers live in the test's loop.
    stop = threading.Event()
    ready = threading.Event()
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            asyncio.run(
                kopf.operator(
                    standalone=True,
                    namespaces=[config.namespaces],
                    memo=memo,
                    stop_flag=stop,
                    ready_flag=ready,
                )
            )
        except BaseException as e:  # surfaced to the test below
            errors.append(e)

    thread = threading.Thread(target=serve, name=f"operator-{operator_id}", daemon=True)
    thread.start()
    await eventually(lambda: ready.is_set() or errors, timeout=20, what="operator ready")
    if errors:
        raise errors[0]
    try:
        yield memo
    finally:
        stop.set()
        await eventually(lambda: not thread.is_alive(), timeout=30, what="operator stopped")
        if previous is None:
            os.environ.pop("KUBECONFIG", None)
        else:
            os.environ["KUBECONFIG"] = previous
        if errors:
            raise errors[0]


OPERATOR_SCRIPT = Path(__file__).resolve().parents[1] / "integration" / "operator" / "operator_process.py"


@contextlib.asynccontextmanager
async def operator_process(
    cluster: Cluster,
    redis_url: str,
    logdir: Path,
    *,
    operator_id: str,
    kill_at: str | None = None,
    kill_at_nth: int = 1,
    lease_ms: int = 2000,
    extra_env: dict[str, str] | None = None,
    command: list[str] | None = None,
) -> AsyncIterator[Any]:
    """The operator in its own process (``python operator_process.py``, or ``command``, e.g. the
    ``agentihooks-operator`` entry point); stopped with SIGTERM at exit."""
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "KUBECONFIG": str(cluster.kubeconfig),
        "AGENTIHOOKS_REDIS_URL": redis_url,
        "AGENTIHOOKS_OPERATOR_ID": operator_id,
        "AGENTIHOOKS_NAMESPACES": getattr(cluster, "namespace", "default"),
        "AGENTIHOOKS_SCAN_NAMESPACES": "false",
        "AGENTIHOOKS_LEASE_MS": str(lease_ms),
        "AGENTIHOOKS_RETRY_DELAY_SECONDS": "0.5",
        "KILL_AT": kill_at or "",
        "KILL_AT_NTH": str(kill_at_nth),
        **(extra_env or {}),
    }
    log = (logdir / f"{operator_id}.log").open("ab")
    argv = command or [sys.executable, str(OPERATOR_SCRIPT)]
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=log)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                await asyncio.to_thread(proc.wait, 20)
            except subprocess.TimeoutExpired:
                proc.kill()
                await asyncio.to_thread(proc.wait, 10)
        log.close()
