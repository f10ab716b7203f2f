"""Setting up a namespace of the real control plane for the operator, as a cluster admin would.

The chart's Swarm CRD applied (and waited for until it is served), a
namespace enforcing Pod Security ``restricted``, the chart's RBAC objects
rendered by ``helm template`` for that namespace, and a TokenRequest token
of the chart's ServiceAccount: the operator's only identity. The demo
(``--control-plane``, ``--evidence``) and the test suite
(``testsupport.realcluster`` re-exports these) set up the same way. Every
request here is the admin's (``system:masters``); a refusal raises
:class:`SetupRefused` with the API server's answer.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any, Protocol

import httpx
import yaml

from .controlplane import ROOT, ControlPlane

CHART = ROOT / "charts" / "agentihooks-recovery"
SWARMS = "/apis/agentihooks.io/v1alpha1/namespaces/{ns}/swarms"
CRD_FILE = CHART / "files" / "crds" / "swarms.agentihooks.io.yaml"
RBAC_KINDS = ("ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}

_COLLECTIONS = {
    "Namespace": "/api/v1/namespaces",
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "Secret": "/api/v1/namespaces/{ns}/secrets",
    "ConfigMap": "/api/v1/namespaces/{ns}/configmaps",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "CustomResourceDefinition": "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
}


class SetupRefused(AssertionError):
    """The API server refused a set-up request, or set-up did not finish in time (the message says which)."""


class Rendered(Protocol):
    returncode: int
    stdout: str
    stderr: str


class HelmRunner(Protocol):
    """Anything that runs the helm binary with arguments (the demo's :class:`PinnedHelm`, the tests' Helm)."""

    def run(self, *args: str) -> Rendered: ...


class PinnedHelm:
    """The helm that ``scripts/install-deps.sh`` pins, run with a HOME of its own (no user config)."""

    def __init__(self, binary: Path, home: Path) -> None:
        self.binary = binary
        self.home = home

    @staticmethod
    def expected() -> Path:
        """Where scripts/install-deps.sh puts it: ``$AGENTIHOOKS_TOOLS_DIR/bin/helm``."""
        base = os.environ.get("AGENTIHOOKS_TOOLS_DIR") or str(Path.home() / ".cache" / "agentihooks-tools")
        return Path(base) / "bin" / "helm"

    @classmethod
    def find(cls) -> Path | None:
        path = cls.expected()
        return path if path.is_file() and os.access(path, os.X_OK) else None

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        self.home.mkdir(parents=True, exist_ok=True)
        env = {"HOME": str(self.home), "PATH": os.environ.get("PATH", "")}
        return subprocess.run(
            [str(self.binary), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            cwd=ROOT,
            check=False,
        )

    def version(self) -> str:
        done = self.run("version", "--short")
        return done.stdout.strip() or done.stderr.strip() or "unknown"


def collection(doc: dict[str, Any], namespace: str | None = None) -> str:
    ns = (doc.get("metadata") or {}).get("namespace") or namespace or "default"
    return _COLLECTIONS[doc["kind"]].format(ns=ns)


def apply(http: httpx.Client, doc: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    """Create ``doc``, or replace it when it exists (what ``kubectl apply`` amounts to here)."""
    path = collection(doc, namespace)
    r = http.post(path, json=doc)
    if r.status_code == 409:
        name = doc["metadata"]["name"]
        current = http.get(f"{path}/{name}").json()
        doc = {
            **doc,
            "metadata": {**doc["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]},
        }
        r = http.put(f"{path}/{name}", json=doc)
    if r.status_code >= 400:
        raise SetupRefused(f"{doc['kind']} {doc['metadata'].get('name')}: {r.status_code} {r.text}")
    return dict(r.json())


def establish_crd(http: httpx.Client, doc: dict[str, Any], within: float = 30.0) -> None:
    """Apply a CustomResourceDefinition and wait until it is Established and its resource is served."""
    apply(http, doc)
    name, kind = doc["metadata"]["name"], doc["spec"]["names"]["kind"]
    deadline = time.monotonic() + within
    while True:
        conds = (http.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}").json()).get(
            "status", {}
        ).get("conditions") or []
        if any(c["type"] == "Established" and c["status"] == "True" for c in conds):
            break
        if time.monotonic() > deadline:
            raise SetupRefused(f"the {kind} CRD was never Established")
        time.sleep(0.1)
    version = next(v["name"] for v in doc["spec"]["versions"] if v.get("served"))
    served = f"/apis/{doc['spec']['group']}/{version}/{doc['spec']['names']['plural']}"
    while http.get(served).status_code != 200:
        if time.monotonic() > deadline:
            raise SetupRefused(f"the {kind} resource was never served")
        time.sleep(0.1)


def install_crd(plane: ControlPlane) -> None:
    """Apply the chart's Swarm CRD and wait until the API server serves it."""
    with plane.client() as http:
        establish_crd(http, yaml.safe_load(CRD_FILE.read_text()))


def create_namespace(plane: ControlPlane, name: str, *, restricted: bool = True) -> None:
    """A namespace (Pod Security ``restricted`` enforced) with its default ServiceAccount made."""
    labels = dict(RESTRICTED) if restricted else {}
    with plane.client() as http:
        apply(http, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
        deadline = time.monotonic() + 30
        while http.get(f"/api/v1/namespaces/{name}/serviceaccounts/default").status_code != 200:
            if time.monotonic() > deadline:
                raise SetupRefused(f"no default ServiceAccount in {name}")
            time.sleep(0.1)


def chart_rbac(
    helm: HelmRunner, release: str, namespace: str, values: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The chart's RBAC objects for a release in ``namespace`` watching that namespace (a
    single-namespace trial: ``rbac.allowReleaseNamespace``; the operator runs as a local process)."""
    res = helm.run(
        "template",
        release,
        str(CHART),
        "--namespace",
        namespace,
        "--set",
        f"rbac.watchNamespaces={{{namespace}}}",
        "--set",
        "rbac.allowReleaseNamespace=true",
        *[a for k, v in (values or {}).items() for a in ("--set", f"{k}={v}")],
    )
    if res.returncode != 0:
        raise SetupRefused(f"helm template failed: {res.stderr}")
    return [d for d in yaml.safe_load_all(res.stdout) if d and d.get("kind") in RBAC_KINDS]


def service_account_token(plane: ControlPlane, namespace: str, name: str, seconds: int = 7200) -> str:
    """A token for the ServiceAccount from the TokenRequest API (what a projected volume holds)."""
    with plane.client() as http:
        r = http.post(
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            json={
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": seconds},
            },
        )
        r.raise_for_status()
        return str(r.json()["status"]["token"])
