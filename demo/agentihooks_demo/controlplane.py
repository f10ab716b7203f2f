"""A real Kubernetes control plane on loopback: etcd, kube-apiserver and kube-controller-manager.

This is what envtest does for Go operators, done for ours: real binaries
(``scripts/control-plane.sh`` finds them in ``$KUBEBUILDER_ASSETS`` or builds
them once into a cache), started as processes with a private etcd, a CA of
their own, RBAC authorization, service-account token signing, an audit log
(how the tests see which calls the operator made, by identity), and (for the
tests; ``fast_node_lifecycle``) node lifecycle settings so that a node that
stops renewing its Lease is marked NotReady, tainted and its Pods evicted
within seconds. The demo (``--control-plane``, ``--evidence``) runs it with
Kubernetes' default node timings; the test suite's ``testsupport.controlplane``
re-exports this module and adds the pytest-aware :func:`find_binaries`. Everything a cluster
does to the operator's requests happens here: selectors, resourceVersion
conflicts, CRD schema validation, admission (Pod Security ``restricted``),
RBAC 403s, finalizers and garbage collection.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import yaml

from .pki import Authority, Pair, service_account_keys
from .procs import free_port

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "control-plane.sh"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager")
ISSUER = "https://kubernetes.default.svc.cluster.local"
#: Services' ClusterIPs; the first is the ``kubernetes`` Service's.
SERVICE_CIDR = "10.0.0.0/24"
KUBERNETES_SERVICE_IP = "10.0.0.1"

AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "None", "users": ["system:kube-controller-manager", "system:apiserver"]},
        {"level": "None", "userGroups": ["system:serviceaccounts:kube-system", "system:nodes"]},
        {"level": "None", "nonResourceURLs": ["/*"]},
        # a Pod create keeps its request body: the labels say which seat and generation it runs
        # (the fault campaign's history; tests/testsupport/chaos)
        {"level": "Request", "verbs": ["create"], "resources": [{"group": "", "resources": ["pods"]}]},
        {"level": "Metadata"},
    ],
}


def locate_binaries(*, build: bool = False) -> Path | None:
    """The folder with the three binaries (``scripts/control-plane.sh``), or ``None``.

    With ``build`` the script builds them when they are missing (minutes, once; its progress goes to
    stderr); otherwise it only looks (``--check``).
    """
    argv = ["bash", str(SCRIPT)] + ([] if build else ["--check"])
    found = subprocess.run(
        argv, stdout=subprocess.PIPE, stderr=None if build else subprocess.PIPE, text=True, check=False
    )
    folder = found.stdout.strip().splitlines()[-1] if found.returncode == 0 and found.stdout.strip() else ""
    if folder and all((Path(folder) / b).is_file() for b in BINARIES):
        return Path(folder)
    return None


def write_kubeconfig(
    path: Path,
    server: str,
    ca: Path,
    *,
    token: str | None = None,
    client: Pair | None = None,
    name: str = "envtest",
    namespace: str | None = None,
) -> Path:
    user: dict[str, Any] = {}
    if token:
        user["token"] = token
    if client is not None:
        user["client-certificate"] = str(client.cert)
        user["client-key"] = str(client.key)
    context = {"cluster": name, "user": name, **({"namespace": namespace} if namespace else {})}
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": context}],
        "current-context": name,
    }
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)
    return path


class ControlPlane:
    """The three processes, their PKI and the admin identity (``system:masters``) used for set-up.

    ``fast_node_lifecycle`` (the tests' default) makes a silent node NotReady in 4 s and evicts its
    Pods 2 s later; without it the control plane keeps Kubernetes' default timings (the demo's).

    The API server listens on loopback only. ``advertise`` is the address the ``kubernetes`` Service's
    endpoints name (what a Pod reaches through the Service's ClusterIP, 10.0.0.1): loopback by
    default; the tests give the real node's address, where the node relays to loopback
    (tests/testsupport/nodenet.py). The serving certificate names both, the ClusterIP and the
    Service's DNS names, so an in-cluster client verifies it whichever way it came.
    """

    def __init__(
        self, bindir: Path, workdir: Path, *, fast_node_lifecycle: bool = True, advertise: str = "127.0.0.1"
    ) -> None:
        self.bindir = bindir
        self.advertise = advertise
        self.workdir = workdir
        self.fast_node_lifecycle = fast_node_lifecycle
        self.pki_dir = workdir / "pki"
        self.logs = workdir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.ca = Authority(self.pki_dir)
        self.serving = self.ca.issue(
            "apiserver",
            "kube-apiserver",
            server=True,
            hosts=(
                "127.0.0.1",
                "localhost",
                advertise,
                KUBERNETES_SERVICE_IP,
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ),
        )
        self.admin = self.ca.issue("admin", "envtest-admin", orgs=("system:masters",))
        self.kcm_identity = self.ca.issue("kcm", "system:kube-controller-manager")
        # what the API server shows a kubelet when it proxies logs, exec and port-forward to it
        self.kubelet_client = self.ca.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client")
        self.sa_keys = service_account_keys(self.pki_dir)
        self.etcd_port = free_port()
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.audit_log = workdir / "audit.log"
        self.audit_policy = workdir / "audit-policy.yaml"
        self.audit_policy.write_text(yaml.safe_dump(AUDIT_POLICY))
        self.admin_kubeconfig = write_kubeconfig(
            workdir / "admin.kubeconfig", self.url, self.ca.cert, client=self.admin
        )
        self.kcm_kubeconfig = write_kubeconfig(
            workdir / "kcm.kubeconfig", self.url, self.ca.cert, client=self.kcm_identity
        )
        self._procs: dict[str, subprocess.Popen[bytes]] = {}

    # -- processes -------------------------------------------------------------------------------
    def _spawn(self, name: str, args: list[str]) -> None:
        log = (self.logs / f"{name}.log").open("ab")
        self._procs[name] = subprocess.Popen(
            [str(self.bindir / name), *args], stdout=log, stderr=log, start_new_session=True
        )
        log.close()

    def start_etcd(self) -> None:
        data = self.workdir / "etcd-data"
        data.mkdir(exist_ok=True)
        client = f"http://127.0.0.1:{self.etcd_port}"
        # the same peer address on a restart: the member's data names the one it was first given
        self._etcd_peer = getattr(self, "_etcd_peer", None) or free_port()
        peer = f"http://127.0.0.1:{self._etcd_peer}"
        self._spawn(
            "etcd",
            [
                f"--data-dir={data}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=default={peer}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )

    def start_apiserver(self) -> None:
        pki = self.pki_dir
        self._spawn(
            "kube-apiserver",
            [
                f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
                "--bind-address=127.0.0.1",
                f"--advertise-address={self.advertise}",
                f"--secure-port={self.port}",
                f"--cert-dir={pki}",
                f"--tls-cert-file={self.serving.cert}",
                f"--tls-private-key-file={self.serving.key}",
                f"--client-ca-file={self.ca.cert}",
                "--authorization-mode=RBAC",
                f"--kubelet-client-certificate={self.kubelet_client.cert}",
                f"--kubelet-client-key={self.kubelet_client.key}",
                "--kubelet-preferred-address-types=InternalIP,Hostname",
                "--allow-privileged=false",
                f"--service-account-issuer={ISSUER}",
                f"--api-audiences={ISSUER}",
                f"--service-account-key-file={self.sa_keys.cert}",
                f"--service-account-signing-key-file={self.sa_keys.key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                *self._toleration_flags(),
                f"--audit-policy-file={self.audit_policy}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-maxsize=0",
                "--profiling=false",
            ],
        )

    def start_controller_manager(self) -> None:
        self._spawn(
            "kube-controller-manager",
            [
                f"--kubeconfig={self.kcm_kubeconfig}",
                "--leader-elect=false",
                "--secure-port=0",
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={self.sa_keys.key}",
                f"--root-ca-file={self.ca.cert}",
                f"--cluster-signing-cert-file={self.ca.cert}",
                f"--cluster-signing-key-file={self.ca.key}",
                *self._node_monitor_flags(),
                "--concurrent-gc-syncs=5",
            ],
        )

    def _toleration_flags(self) -> list[str]:
        if not self.fast_node_lifecycle:
            return []
        # Pods tolerate a NotReady/unreachable node this long before the taint evicts them.
        return ["--default-not-ready-toleration-seconds=2", "--default-unreachable-toleration-seconds=2"]

    def _node_monitor_flags(self) -> list[str]:
        if not self.fast_node_lifecycle:
            return []
        # Node lifecycle at test speed: a node silent 4 s is NotReady, then tainted at once.
        return [
            "--node-monitor-period=1s",
            "--node-monitor-grace-period=4s",
            "--node-startup-grace-period=10s",
            "--node-eviction-rate=10",
            "--secondary-node-eviction-rate=10",
        ]

    def start(self) -> None:
        self.start_etcd()
        self.start_apiserver()
        self.wait_ready()
        self.start_controller_manager()
        self.wait_controllers()

    def stop_process(self, name: str, sig: int = signal.SIGTERM) -> None:
        proc = self._procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def restart_apiserver(self, down_seconds: float = 0.0) -> None:
        """Stop kube-apiserver (etcd keeps every object), optionally wait, start it again."""
        self.stop_process("kube-apiserver")
        time.sleep(down_seconds)
        self.start_apiserver()
        self.wait_ready()

    def restart_etcd(self, down_seconds: float = 0.0) -> None:
        """Stop etcd (SIGTERM: it syncs what it acknowledged), optionally wait, start it again on the
        same data and ports; returns once the API server is ready on it again."""
        self.stop_process("etcd")
        time.sleep(down_seconds)
        self.start_etcd()
        self.wait_ready()

    def stop(self) -> None:
        for name in ("kube-controller-manager", "kube-apiserver", "etcd"):
            self.stop_process(name)

    def processes(self) -> dict[str, subprocess.Popen[bytes]]:
        """The running processes by binary name, in start order (for a caller that stops them itself)."""
        return dict(self._procs)

    def alive(self, name: str) -> bool:
        proc = self._procs.get(name)
        return proc is not None and proc.poll() is None

    # -- access ----------------------------------------------------------------------------------
    def tls(self, identity: Pair | None = None) -> ssl.SSLContext:
        """Trusts this control plane's CA and presents ``identity`` (default: the admin)."""
        ctx = ssl.create_default_context(cafile=str(self.ca.cert))
        pair = identity or self.admin
        ctx.load_cert_chain(str(pair.cert), str(pair.key))
        return ctx

    def client(self, timeout: float = 10.0) -> httpx.Client:
        return httpx.Client(base_url=self.url, verify=self.tls(), timeout=timeout)

    def async_client(self, timeout: float = 10.0) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, verify=self.tls(), timeout=timeout)

    def _log_tail(self, name: str) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def wait_ready(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        with self.client(timeout=2.0) as http:
            while True:
                for name in ("etcd", "kube-apiserver"):
                    if not self.alive(name):
                        raise RuntimeError(f"{name} exited during start-up:\n{self._log_tail(name)}")
                with contextlib.suppress(httpx.HTTPError):
                    if http.get("/readyz").status_code == 200:
                        return
                if time.monotonic() > deadline:
                    raise RuntimeError(f"kube-apiserver not ready:\n{self._log_tail('kube-apiserver')}")
                time.sleep(0.2)

    def wait_controllers(self, timeout: float = 60.0) -> None:
        """kube-controller-manager is working once it has made the default namespace's ServiceAccount."""
        deadline = time.monotonic() + timeout
        with self.client() as http:
            while http.get("/api/v1/namespaces/default/serviceaccounts/default").status_code != 200:
                if not self.alive("kube-controller-manager"):
                    raise RuntimeError(
                        "kube-controller-manager exited:\n" + self._log_tail("kube-controller-manager")
                    )
                if time.monotonic() > deadline:
                    raise RuntimeError("kube-controller-manager made no ServiceAccount in time")
                time.sleep(0.2)

    def versions(self) -> dict[str, str]:
        """What each binary reports (for the evidence record's backend)."""
        out: dict[str, str] = {}
        for name in BINARIES:
            flag = "--version"
            res = subprocess.run([str(self.bindir / name), flag], capture_output=True, text=True, check=False)
            text = (res.stdout or res.stderr).strip().splitlines()
            out[name] = text[0] if text else "unknown"
        return out

    # -- audit -----------------------------------------------------------------------------------
    def audit_events(self) -> Iterator[dict[str, Any]]:
        if not self.audit_log.exists():
            return
        with self.audit_log.open() as f:
            for line in f:
                with contextlib.suppress(ValueError):
                    yield json.loads(line)


@contextlib.contextmanager
def control_plane(
    workdir: Path, bindir: Path, *, fast_node_lifecycle: bool = True, advertise: str = "127.0.0.1"
) -> Iterator[ControlPlane]:
    """The control plane started in ``workdir``, stopped (and its etcd data removed) on exit."""
    plane = ControlPlane(bindir, workdir, fast_node_lifecycle=fast_node_lifecycle, advertise=advertise)
    try:
        plane.start()
        yield plane
    finally:
        plane.stop()
        if not os.environ.get("AGENTIHOOKS_KEEP_CONTROL_PLANE"):
            shutil.rmtree(workdir / "etcd-data", ignore_errors=True)
