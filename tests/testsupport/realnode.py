"""A real node beside the test control plane: containerd, runc, a CNI bridge and a real kubelet.

Pods scheduled here really run: runc starts their containers under cgroup
limits the kernel enforces, with the security context they ask for (read-only
root, no capabilities, seccomp), and a container past its memory limit is
OOM-killed by the kernel. What it takes on this machine kind is in
../shared/REALNODE.md; the settings that matter:

- containerd with its own root, state and socket under ``ROOT`` (never the
  machine's own), ``restrict_oom_score_adj`` (root here lacks
  CAP_SYS_RESOURCE), cgroupfs (no systemd), the pause image built locally;
- a CNI bridge ``agentihooks0`` on 10.88.0.0/24 with no masquerade and routes
  to 10.88.0.0/16 only: Pods reach the host and each other, nothing beyond;
- the kubelet on a node address added to ``lo`` (``NODE_IP``; the kubelet
  refuses a loopback one), cgroup v1 allowed, its own root and Pod log folders,
  a client certificate of group ``system:nodes`` bound to the ``system:node``
  ClusterRole;
- kube-scheduler, so Pods the operator creates without a node get this one; the node carries a
  label and a NoSchedule taint (``MARK``) that only Pods built from :data:`POD_TEMPLATE` select and
  tolerate, so Pods of tests meant for the simulated kubelet never land here;
- the cluster network a Pod expects (what the chart installed in Pods needs): kube-proxy in
  iptables mode turns Services' ClusterIPs (10.0.0.0/24, routed from the Pods) into their
  endpoints, the ``kubernetes`` Service's included (the control plane advertises ``NODE_IP``, and
  :mod:`testsupport.nodenet` relays it to the loopback API server), and Service names resolve
  through ``nodenet``'s DNS on ``NODE_IP`` (the kubelet's ``clusterDNS``).

The node touches host-wide state (``lo``'s address, the bridge, iptables,
``kubepods`` cgroups), so one real node runs per machine at a time: ``up``
holds an exclusive lock on ``ROOT/lock`` and refuses, naming the holder, when
another run has it. :func:`clean` undoes everything a node made, including
what a killed earlier run left behind (processes, shims, mounts, network
namespaces, links, cgroups, iptables chains); ``up`` runs it first.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from agentihooks_demo.controlplane import SERVICE_CIDR, ControlPlane, free_port, write_kubeconfig

from . import nodecache, nodeports
from .images import PAUSE_REF, pause_image

ROOT = Path(os.environ.get("AGENTIHOOKS_NODE_ROOT", "/var/lib/agentihooks-node"))
NODE_NAME = "agentihooks-node"
NODE_IP = "10.88.1.1"
BRIDGE = "agentihooks0"
#: The node's label and taint: only Pods that select and tolerate it land here (:data:`POD_TEMPLATE`),
#: never another test's Pods meant for the simulated kubelet.
MARK = "agentihooks.io/real-node"
#: What a Swarm's ``podTemplate.spec`` needs to run its Pods on the real node.
POD_TEMPLATE: dict[str, Any] = {
    "nodeSelector": {MARK: "true"},
    "tolerations": [{"key": MARK, "operator": "Exists", "effect": "NoSchedule"}],
}
POD_CIDR = "10.88.0.0/24"
CNI_BIN = Path("/usr/lib/cni")
REPO = Path(__file__).resolve().parents[2]
IMAGES = Path(os.environ.get("AGENTIHOOKS_IMAGE_CACHE", Path.home() / ".cache" / "agentihooks" / "images"))


class NodeUnavailable(RuntimeError):
    """This machine cannot host a real node now; the message names why (skip or fail on it)."""


def why_not() -> str | None:
    """The reason this machine cannot host a real node, or ``None`` when it can."""
    if os.geteuid() != 0:
        return "the real node needs root (it mounts, makes cgroups and network links)"
    if not Path("/sys/fs/cgroup/memory").is_dir() and not Path("/sys/fs/cgroup/cgroup.controllers").exists():
        return "no memory cgroup: the kernel could not enforce a Pod's memory limit"
    for tool in ("containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables", "ip"):
        if shutil.which(tool) is None:
            return (
                f"{tool} is missing (scripts/install-deps.sh installs containerd, runc and the CNI plugins)"
            )
    if not (CNI_BIN / "bridge").exists() or not (CNI_BIN / "host-local").exists():
        return f"the CNI plugins are missing from {CNI_BIN} (apt-get install containernetworking-plugins)"
    return None


def node_binaries() -> Path:
    """kubelet, kube-scheduler and kube-proxy: found or built by scripts/node-binaries.sh."""
    res = subprocess.run(
        [str(REPO / "scripts" / "node-binaries.sh")], capture_output=True, text=True, timeout=3600
    )
    if res.returncode != 0:
        raise NodeUnavailable(f"scripts/node-binaries.sh failed: {res.stderr.strip()[-2000:]}")
    return Path(res.stdout.strip().splitlines()[-1])


def _run(*args: str, check: bool = False, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, check=check, timeout=timeout)


def _kill_matching(pattern: str) -> None:
    """SIGKILL every process whose command line mentions ``pattern`` (a killed run's leftovers)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if pattern in cmdline:
                os.kill(int(proc.name), signal.SIGKILL)


#: A supplementary group the kubelet runs with (its uid and primary group stay root): the partition's
#: iptables rules pick its connections out by it (``-m owner --gid-owner ... --suppl-groups``).
KUBELET_GROUP = 48711
#: The connection mark of the kubelet's connections while the node is partitioned, and the chains
#: (``AGH-PART-*``) of the partition's rules; cleaned with the KUBE-* chains.
PARTITION_MARK = "0x4711"
PARTITION = "AGH-PART-"


def _iptables_clean() -> None:
    """Drop the chains the kubelet and CNI made (KUBE-*, CNI-*), a partition's (AGH-PART-*), and every
    jump to them."""
    for tool in ("iptables", "ip6tables"):
        if shutil.which(tool) is None:
            continue
        for table in ("filter", "nat", "mangle"):
            saved = _run(f"{tool}-save", "-t", table).stdout.splitlines()
            ours = {
                ln[1:].split()[0]
                for ln in saved
                if ln.startswith(":") and ln[1:].startswith(("KUBE-", "CNI-", PARTITION))
            }
            for line in saved:
                parts = shlex.split(line)  # the rules' comments are quoted and hold spaces
                if line.startswith("-A ") and parts[1] not in ours and any(c in line for c in ours):
                    _run(tool, "-t", table, "-D", *parts[1:])
            for chain in ours:
                _run(tool, "-t", table, "-F", chain)
            for chain in ours:
                _run(tool, "-t", table, "-X", chain)


def _cgroups_clean() -> None:
    base = Path("/sys/fs/cgroup")
    for top in [base / "kubepods", *(p / "kubepods" for p in base.iterdir() if p.is_dir())]:
        if not top.is_dir():
            continue
        for folder in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            with contextlib.suppress(OSError):
                folder.rmdir()
        with contextlib.suppress(OSError):
            top.rmdir()


def _unmount_under(root: Path) -> None:
    mounts = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4].replace("\\040", " ")
            if point == str(root) or point.startswith(str(root) + "/"):
                mounts.append(point)
    for point in sorted(mounts, key=len, reverse=True):
        _run("umount", "-l", point)


def clean(root: Path = ROOT) -> None:
    """Undo everything a node under ``root`` made, also after a killed run (idempotent)."""
    _kill_matching(str(root))  # kubelet, containerd, scheduler, proxy and shims of an earlier run
    _kill_matching("containerd-shim-runc-v2 -namespace k8s.io -address " + str(root))
    _unmount_under(root)
    for ns in _run("ip", "netns", "list").stdout.split():
        if ns.startswith("cni-"):
            _run("ip", "netns", "delete", ns)
    with contextlib.suppress(OSError):
        for netns in Path("/var/run/netns").glob("cni-*"):
            _run("umount", "-l", str(netns))
            netns.unlink()
    _run("ip", "link", "delete", BRIDGE)
    _run("ip", "addr", "del", f"{NODE_IP}/32", "dev", "lo")
    _iptables_clean()
    _cgroups_clean()
    shutil.rmtree(root / "run", ignore_errors=True)
    shutil.rmtree(root / "kubelet", ignore_errors=True)


def leftovers(root: Path = ROOT) -> list[str]:
    """What a node under ``root`` made that is still there: empty after :func:`clean`."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            with contextlib.suppress(OSError):
                if str(root).encode() in (proc / "cmdline").read_bytes():
                    found.append(f"process {proc.name} ({(proc / 'comm').read_text().strip()})")
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4]
            if point == str(root) or point.startswith(f"{root}/"):
                found.append(f"mount {point}")
    found += [
        f"network namespace {ns}"
        for ns in _run("ip", "netns", "list").stdout.split()
        if ns.startswith("cni-")
    ]
    if _run("ip", "link", "show", BRIDGE).returncode == 0:
        found.append(f"link {BRIDGE}")
    if f" {NODE_IP}/" in _run("ip", "-4", "addr", "show", "dev", "lo").stdout:
        found.append(f"address {NODE_IP} on lo")
    for table in ("filter", "nat", "mangle"):
        for line in _run("iptables-save", "-t", table).stdout.splitlines():
            if line.startswith((":KUBE-", ":CNI-")):
                found.append(f"iptables chain {table}/{line[1:].split()[0]}")
    base = Path("/sys/fs/cgroup")
    with contextlib.suppress(OSError):
        tops = [base / "kubepods", *(p / "kubepods" for p in base.iterdir() if p.is_dir())]
        found += [f"cgroup {top}" for top in tops if top.is_dir()]
    return found


@dataclass
class RealNode:
    plane: ControlPlane
    root: Path = ROOT
    name: str = NODE_NAME
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    _lock: Any = None

    @property
    def socket(self) -> Path:
        return self.root / "run" / "containerd.sock"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    # -- lifecycle -------------------------------------------------------------------------------
    def up(self, timeout: float = 120.0) -> RealNode:
        reason = why_not()
        if reason is not None:
            raise NodeUnavailable(reason)
        self.root.mkdir(parents=True, exist_ok=True)
        lock = (self.root / "lock").open("a+")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as e:
            lock.seek(0)
            holder = lock.read().strip() or "?"
            lock.close()  # and touch nothing: the node is the holder's (``down`` leaves it alone)
            raise NodeUnavailable(
                f"another run (pid {holder}) holds the real node ({self.root / 'lock'}): one per machine"
            ) from e
        self._lock = lock
        self._lock.seek(0)
        self._lock.truncate()
        self._lock.write(str(os.getpid()))
        self._lock.flush()
        clean(self.root)
        binaries = node_binaries()
        for folder in ("run", "containerd", "kubelet", "logs", "pod-logs", "cni/net.d", "cni/ipam", "pki"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        self._network()
        busy = nodeports.taken(NODE_IP)
        if busy is not None:
            raise NodeUnavailable(busy)
        self._start_nodenet()
        self._start_containerd()
        self.import_image(pause_image(IMAGES))
        self._start_kubelet(binaries)
        self._start_scheduler(binaries)
        self._start_proxy(binaries)
        self.wait_ready(timeout)
        return self

    def down(self) -> None:
        """Stop and remove everything this node made; a node refused at ``up`` (another run holds
        the lock) made nothing and removes nothing."""
        if self._lock is None:
            return
        for name in ("kube-proxy", "kube-scheduler", "kubelet"):
            self._stop(name)
        self._delete_containers()
        self._stop("containerd")
        self._stop("nodenet")
        clean(self.root)
        with contextlib.suppress(OSError), self.plane.client() as http:
            http.delete(f"/api/v1/nodes/{self.name}")
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    def _stop(self, name: str, grace: float = 10.0) -> None:
        proc = self.procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    def _spawn(self, name: str, argv: list[str], groups: list[int] | None = None) -> None:
        with (self.logs / f"{name}.log").open("ab") as log:
            self.procs[name] = subprocess.Popen(
                argv, stdout=log, stderr=log, start_new_session=True, extra_groups=groups
            )

    def _log_tail(self, name: str, size: int = 3000) -> str:
        with contextlib.suppress(OSError):
            return (self.logs / f"{name}.log").read_text(errors="replace")[-size:]
        return ""

    # -- parts -----------------------------------------------------------------------------------
    def _network(self) -> None:
        _run("ip", "addr", "add", f"{NODE_IP}/32", "dev", "lo", check=True)
        Path("/proc/sys/net/ipv4/ip_forward").write_text("1")
        conflist = {
            "cniVersion": "1.0.0",
            "name": "agentihooks",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": BRIDGE,
                    "isGateway": True,
                    "ipMasq": False,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_CIDR}]],
                        # the Pod network and the Services' ClusterIPs (kube-proxy on the host): nothing else
                        "routes": [{"dst": "10.88.0.0/16"}, {"dst": SERVICE_CIDR}],
                        "dataDir": str(self.root / "cni" / "ipam"),
                    },
                }
            ],
        }
        (self.root / "cni" / "net.d" / "10-agentihooks.conflist").write_text(json.dumps(conflist))

    def _start_containerd(self) -> None:
        config = f"""version = 2
root = "{self.root / "containerd"}"
state = "{self.root / "run" / "containerd"}"
[grpc]
  address = "{self.socket}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_REF}"
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN}"
    conf_dir = "{self.root / "cni" / "net.d"}"
[plugins."io.containerd.internal.v1.opt"]
  path = "{self.root / "containerd" / "opt"}"
"""
        path = self.root / "containerd.toml"
        path.write_text(config)
        self._spawn("containerd", ["containerd", "--config", str(path)])
        deadline = time.monotonic() + 30
        while _run("ctr", "--address", str(self.socket), "version").returncode != 0:
            if self.procs["containerd"].poll() is not None or time.monotonic() > deadline:
                raise NodeUnavailable(f"containerd did not start:\n{self._log_tail('containerd')}")
            time.sleep(0.2)

    def ctr(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return _run("ctr", "--address", str(self.socket), "-n", "k8s.io", *args, timeout=timeout)

    def import_image(self, tarball: Path) -> None:
        """Import (and unpack) an image archive, then warm its files (:meth:`warm`)."""
        res = self.ctr("images", "import", "--no-unpack=false", str(tarball))
        if res.returncode != 0:
            res = self.ctr("images", "import", str(tarball))
        if res.returncode != 0:
            raise NodeUnavailable(f"importing {tarball.name} into containerd failed: {res.stderr.strip()}")
        for line in res.stdout.splitlines():  # "unpacking REF (sha256:...)...done", one per image
            if line.startswith("unpacking "):
                self.warm(line.split()[1])

    def warm(self, ref: str) -> int:
        """Read the image's files from this process (testsupport/nodecache.py says why: so a Pod
        past its memory limit is killed, not left thrashing on its own code pages); bytes read."""
        try:
            return nodecache.warm(self.ctr, ref)
        except nodecache.WarmFailed as e:
            raise NodeUnavailable(str(e)) from e

    def process_of(self, pod: dict[str, Any]) -> Path:
        """The /proc folder of the Pod's (first) container's process, found through containerd."""
        cid = pod["status"]["containerStatuses"][0]["containerID"].removeprefix("containerd://")
        for line in self.ctr("tasks", "list").stdout.splitlines()[1:]:
            words = line.split()
            if words and words[0] == cid:
                return Path("/proc") / words[1]
        raise AssertionError(f"no containerd task for {cid}")

    def _delete_containers(self) -> None:
        if self.procs.get("containerd") is None:
            return
        for cid in self.ctr("tasks", "list", "-q").stdout.split():
            self.ctr("tasks", "kill", "-s", "SIGKILL", cid)
        time.sleep(0.5)
        for cid in self.ctr("tasks", "list", "-q").stdout.split():
            self.ctr("tasks", "delete", "-f", cid)
        for cid in self.ctr("containers", "list", "-q").stdout.split():
            self.ctr("containers", "delete", cid)

    def _start_kubelet(self, binaries: Path) -> None:
        pki = self.root / "pki"
        identity = self.plane.ca.issue("kubelet-client", f"system:node:{self.name}", orgs=("system:nodes",))
        serving = self.plane.ca.issue("kubelet-serving", self.name, server=True, hosts=(NODE_IP, self.name))
        with self.plane.client() as http:
            binding = {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "agentihooks-node"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "system:node",
                },
                "subjects": [
                    {"kind": "Group", "name": "system:nodes", "apiGroup": "rbac.authorization.k8s.io"}
                ],
            }
            made = http.post("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", json=binding)
            if made.status_code not in (201, 409):
                raise NodeUnavailable(f"binding the node's identity failed: {made.text}")
        kubeconfig = write_kubeconfig(
            pki / "kubelet.kubeconfig", self.plane.url, self.plane.ca.cert, client=identity
        )
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "address": NODE_IP,
            "port": 10250,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": 0,
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": False},
                "x509": {"clientCAFile": str(self.plane.ca.cert)},
            },
            "authorization": {"mode": "AlwaysAllow"},
            "tlsCertFile": str(serving.cert),
            "tlsPrivateKeyFile": str(serving.key),
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            "podLogsDir": str(self.root / "pod-logs"),
            "failSwapOn": False,
            "resolvConf": "",
            "clusterDNS": [NODE_IP],  # testsupport.nodenet answers Service names from the API
            "clusterDomain": "cluster.local",
            "serializeImagePulls": False,
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {"memory.available": "50Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
            "enforceNodeAllocatable": [],
            "localStorageCapacityIsolation": False,
            "maxPods": 40,
            # The test control plane calls a node lost after 4 s of silence (ControlPlane's
            # fast_node_lifecycle); the kubelet's default Lease (40 s, renewed every 10 s) would leave it
            # Unknown and tainted ``unreachable`` most of every 10 s, and the taint manager would evict
            # its Pods. A 2 s Lease is renewed every 0.5 s.
            "nodeLeaseDurationSeconds": 2,
        }
        path = pki / "kubelet.yaml"
        path.write_text(json.dumps(config))
        self._spawn(
            "kubelet",
            [
                str(binaries / "kubelet"),
                f"--config={path}",
                f"--kubeconfig={kubeconfig}",
                f"--root-dir={self.root / 'kubelet'}",
                f"--node-ip={NODE_IP}",
                f"--hostname-override={self.name}",
                f"--node-labels={MARK}=true",
                f"--register-with-taints={MARK}=true:NoSchedule",
                "--v=1",
            ],
            groups=[KUBELET_GROUP],
        )

    def _start_scheduler(self, binaries: Path) -> None:
        pki = self.root / "pki"
        identity = self.plane.ca.issue("scheduler", "system:kube-scheduler")
        kubeconfig = write_kubeconfig(
            pki / "scheduler.kubeconfig", self.plane.url, self.plane.ca.cert, client=identity
        )
        self._spawn(
            "kube-scheduler",
            [
                str(binaries / "kube-scheduler"),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--leader-elect=false",
                "--secure-port=0",
            ],
        )

    def _start_nodenet(self) -> None:
        """DNS for Service names and the API server relay on ``NODE_IP`` (:mod:`testsupport.nodenet`)."""
        argv = [
            sys.executable,
            "-m",
            "testsupport.nodenet",
            f"--root={self.root}",
            f"--listen={NODE_IP}",
            f"--relay-port={self.plane.port}",
            f"--relay-to=127.0.0.1:{self.plane.port}",
            f"--api={self.plane.url}",
            f"--ca={self.plane.ca.cert}",
            f"--cert={self.plane.admin.cert}",
            f"--key={self.plane.admin.key}",
        ]
        log = (self.logs / "nodenet.log").open("ab")
        env = {**os.environ, "PYTHONPATH": str(REPO / "tests")}
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, env=env, start_new_session=True)
        self.procs["nodenet"] = proc  # type: ignore[assignment]
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.strip() != b"ready":
            raise NodeUnavailable(f"the node's DNS and API relay did not start:\n{self._log_tail('nodenet')}")

    def _start_proxy(self, binaries: Path) -> None:
        pki = self.root / "pki"
        identity = self.plane.ca.issue("kube-proxy", "system:kube-proxy")  # bound to system:node-proxier
        kubeconfig = write_kubeconfig(
            pki / "proxy.kubeconfig", self.plane.url, self.plane.ca.cert, client=identity
        )
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(kubeconfig)},
            "mode": "iptables",
            "hostnameOverride": self.name,
            "clusterCIDR": POD_CIDR,
            "bindAddress": NODE_IP,
            "healthzBindAddress": f"127.0.0.1:{free_port()}",
            "metricsBindAddress": f"127.0.0.1:{free_port()}",
            "nodePortAddresses": [f"{NODE_IP}/32"],  # never the machine's own addresses
            # no conntrack sysctls: this machine's /proc/sys may refuse them, and the defaults serve
            "conntrack": {"maxPerCore": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
        }
        path = pki / "proxy.yaml"
        path.write_text(json.dumps(config))
        self._spawn("kube-proxy", [str(binaries / "kube-proxy"), f"--config={path}", "--v=1"])

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self.plane.client() as http:
            while True:
                for name in ("containerd", "kubelet", "kube-scheduler", "kube-proxy", "nodenet"):
                    if self.procs[name].poll() is not None:
                        raise NodeUnavailable(f"{name} exited:\n{self._log_tail(name)}")
                if _ready(http, self.name):
                    return
                if time.monotonic() > deadline:
                    raise NodeUnavailable(
                        f"node {self.name} not Ready in {timeout:.0f} s:\n{self._log_tail('kubelet')}"
                    )
                time.sleep(0.5)

    def partition(self, control_port: int) -> None:
        """Cut the node off as a network partition does, its processes left running: every packet of
        the kubelet's connections (to the API server: its node lease, status and watches) is dropped
        both ways, and so are the Pods' packets to the control API on ``NODE_IP:control_port``.
        Nothing is refused (connections hang, as across a real partition); containers keep running
        and still reach everything else on this machine (the model API). :meth:`heal` undoes it."""
        out, inp, mangle = f"{PARTITION}OUT", f"{PARTITION}IN", f"{PARTITION}MARK"
        rules = [
            ("mangle", mangle, ["-m", "owner", "--gid-owner", str(KUBELET_GROUP), "--suppl-groups",
                                "-j", "CONNMARK", "--set-mark", PARTITION_MARK]),
            ("filter", out, ["-m", "connmark", "--mark", PARTITION_MARK, "-j", "DROP"]),
            ("filter", inp, ["-m", "connmark", "--mark", PARTITION_MARK, "-j", "DROP"]),
            ("filter", inp, ["-s", POD_CIDR, "-d", NODE_IP, "-p", "tcp", "--dport", str(control_port),
                             "-j", "DROP"]),
        ]  # fmt: skip
        for table, chain, _ in rules:
            _run("iptables", "-t", table, "-N", chain)
        for table, chain, rule in rules:
            _run("iptables", "-t", table, "-A", chain, *rule, check=True)
        for table, hook, chain in (
            ("mangle", "OUTPUT", mangle),
            ("filter", "OUTPUT", out),
            ("filter", "INPUT", inp),
        ):
            _run("iptables", "-t", table, "-I", hook, "1", "-j", chain, check=True)

    def heal(self) -> None:
        """Undo :meth:`partition`: the chains go, and the kubelet's connections are flushed from conntrack
        marks by their removal (a marked connection's packets pass again)."""
        for table, hook, chain in (
            ("mangle", "OUTPUT", f"{PARTITION}MARK"),
            ("filter", "OUTPUT", f"{PARTITION}OUT"),
            ("filter", "INPUT", f"{PARTITION}IN"),
        ):
            _run("iptables", "-t", table, "-D", hook, "-j", chain)
            _run("iptables", "-t", table, "-F", chain)
            _run("iptables", "-t", table, "-X", chain)

    def stop_kubelet(self) -> None:
        """The kubelet stops (SIGTERM) and the node goes silent; its containers keep running, as when
        a node's agent dies or the node is cut off: what the control plane sees is a lost node."""
        self._stop("kubelet")

    def start_kubelet(self) -> None:
        self._start_kubelet(node_binaries())

    def restart_kubelet(self, down_seconds: float = 0.0) -> None:
        self.stop_kubelet()
        time.sleep(down_seconds)
        self.start_kubelet()


def _ready(http: httpx.Client, name: str) -> bool:
    r = http.get(f"/api/v1/nodes/{name}")
    if r.status_code != 200:
        return False
    conditions = r.json().get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def main(argv: list[str] | None = None) -> int:
    """``python -m testsupport.realnode clean|check``: remove what a (killed) run left, or say whether
    this machine can host a node."""

    args = sys.argv[1:] if argv is None else argv
    if args == ["clean"]:
        ROOT.mkdir(parents=True, exist_ok=True)
        with (ROOT / "lock").open("a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.seek(0)
                holder = lock.read().strip() or "?"
                print(
                    f"real node: a run (pid {holder}) holds {ROOT / 'lock'}; nothing cleaned", file=sys.stderr
                )
                return 1
            clean()
        left = leftovers()
        if left:
            print("real node: still there after cleaning: " + "; ".join(left), file=sys.stderr)
            return 1
        print(f"real node: cleaned {ROOT}, {BRIDGE}, {NODE_IP} on lo, KUBE-/CNI- chains, kubepods cgroups")
        return 0
    if args == ["check"]:
        reason = why_not()
        print(reason or "this machine can host a real node")
        left = leftovers()
        if left:
            print(
                "left by an earlier run (the next start, or scripts/node.sh clean, removes it): "
                + "; ".join(left)
            )
        return 0 if reason is None else 1
    print("usage: python -m testsupport.realnode clean|check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())


def proc_status(proc: Path, name: str) -> str:
    """One field of ``/proc/<pid>/status`` (``CapEff``, ``NoNewPrivs``, ``Seccomp``, ``Uid``...): how
    the tests read the security context a real container's process really got."""
    for line in (proc / "status").read_text().splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"{name} not in {proc}/status")
