"""``--control-plane`` (and ``--evidence``): the demo on a real Kubernetes control plane on loopback.

Real ``etcd``, ``kube-apiserver`` (RBAC, Pod Security admission, audit log)
and ``kube-controller-manager`` at the pinned version of
``scripts/control-plane.sh``, with Kubernetes' default node timings. Set up
as a cluster admin would: the chart's Swarm CRD, the namespace
``agentihooks-demo`` enforcing Pod Security ``restricted``, and the chart's
RBAC objects rendered by the pinned ``helm template`` for it. The operator
then runs with a kubeconfig that holds only a TokenRequest token of the
chart's ServiceAccount, so everything it does is what the chart allows. There
is still no container runtime and no scheduler: the demo's kubelet binds the
Pods and runs the workers as local processes (:class:`agentihooks_demo.node.RealApi`).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import httpx

from .cluster import (
    PinnedHelm,
    SetupRefused,
    apply,
    chart_rbac,
    create_namespace,
    install_crd,
    service_account_token,
)
from .controlplane import BINARIES, ControlPlane, locate_binaries, write_kubeconfig
from .procs import Processes
from .stack import KubeApi, StackError

NAMESPACE = "agentihooks-demo"
RELEASE = "agentihooks"
#: The operator's token lasts a day (a ``--keep`` demo left running stays authorized).
TOKEN_SECONDS = 86400
ANNOUNCE = (
    "Kubernetes API: real control plane on loopback (etcd, kube-apiserver, kube-controller-manager); "
    "the operator runs as the chart's ServiceAccount with the chart's RBAC only"
)


def folder(workdir: Path) -> Path:
    return workdir / "control-plane"


def preflight() -> tuple[Path, Path]:
    """The control-plane binaries (built once when missing) and the pinned helm, or a clear error."""
    helm = PinnedHelm.find()
    if helm is None:
        raise StackError(
            f"helm not found at {PinnedHelm.expected()}: the control plane's RBAC is rendered from the "
            "chart with the pinned helm; run `make install` (scripts/install-deps.sh) first"
        )
    bindir = locate_binaries()
    if bindir is None:
        print(
            "control plane: no etcd/kube-apiserver/kube-controller-manager yet; running "
            "scripts/control-plane.sh to build them once (several minutes on a cold cache)",
            flush=True,
        )
        bindir = locate_binaries(build=True)
    if bindir is None:
        raise StackError(
            f"no {', '.join(BINARIES)}: run `make control-plane` (it builds them with Go) "
            "or set KUBEBUILDER_ASSETS to a folder holding them"
        )
    return bindir, helm


def start_control_plane(
    workdir: Path, procs: Processes, say: Any = print, *, advertise: str = "127.0.0.1"
) -> KubeApi:
    """``advertise``: what the ``kubernetes`` Service's endpoints name (a real node's address when one
    runs beside it: Pods reach the API server there)."""
    bindir, helm_binary = preflight()
    plane = ControlPlane(bindir, folder(workdir), fast_node_lifecycle=False, advertise=advertise)
    try:
        plane.start()
    except RuntimeError as e:
        raise StackError(f"the control plane did not start ({plane.logs}): {e}") from e
    finally:
        for name, proc in plane.processes().items():  # stopped with everything else the demo started
            procs.adopt(name, proc, plane.logs / f"{name}.log")
    versions = plane.versions()
    say(f"[start] control plane at {plane.url}: " + ", ".join(f"{k}: {v}" for k, v in versions.items()))
    helm = PinnedHelm(helm_binary, workdir / "helm-home")
    versions["helm"] = helm.version()
    try:
        install_crd(plane)
        create_namespace(plane, NAMESPACE)
        docs = chart_rbac(helm, RELEASE, NAMESPACE)
        with plane.client() as http:
            for doc in docs:
                apply(http, doc, NAMESPACE)
        account = next(d for d in docs if d["kind"] == "ServiceAccount")["metadata"]["name"]
        token = service_account_token(plane, NAMESPACE, account, seconds=TOKEN_SECONDS)
    except (SetupRefused, httpx.HTTPError, StopIteration) as e:
        raise StackError(f"setting up the control plane failed: {e}") from e
    kubeconfig = write_kubeconfig(
        workdir / "kubeconfig", plane.url, plane.ca.cert, token=token, name="agentihooks-demo"
    )
    kinds = sorted({d["kind"] for d in docs})
    say(
        f"[start] Swarm CRD applied; namespace {NAMESPACE} enforces Pod Security 'restricted'; "
        f"the chart's RBAC ({', '.join(kinds)}; {versions['helm']} template) applied"
    )
    user = f"system:serviceaccount:{NAMESPACE}:{account}"
    say(f"[start] the operator's kubeconfig holds only a TokenRequest token of {user}")
    return KubeApi(plane.url, kubeconfig, NAMESPACE, plane, versions, user)


def remove_data(workdir: Path) -> None:
    """etcd's data (its write-ahead log is preallocated, tens of MB); the logs stay."""
    shutil.rmtree(folder(workdir) / "etcd-data", ignore_errors=True)
