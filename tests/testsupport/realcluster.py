"""A test's slice of the real control plane: its own namespace, the chart's RBAC, the operator's identity.

Each test gets a namespace that enforces Pod Security ``restricted`` and a
release of the chart's RBAC objects rendered by ``helm template`` (the
ServiceAccount, the Role and RoleBinding of the watched namespace, the
ClusterRole for Nodes and its binding) applied by the admin. The operator
then runs with a kubeconfig that holds only a TokenRequest token of that
ServiceAccount, so every call it makes is authorized by the chart's rules and
nothing else: a missing verb is a real 403. The audit log tells which calls
the operator made (by identity), which is what the RBAC test compares with
the chart. :class:`RealCluster` offers the same helpers as the emulator's
``Cluster`` so scenarios run on either. The set-up steps (CRD, namespace,
chart RBAC, token) are the demo's :mod:`agentihooks_demo.cluster`, which
``make demo DEMO_ARGS=--control-plane`` and ``make evidence`` use too.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from agentihooks_demo.cluster import (
    CRD_FILE,
    RBAC_KINDS,
    RESTRICTED,
    SWARMS,
    apply,
    chart_rbac,
    collection,
    create_namespace,
    establish_crd,
    install_crd,
    service_account_token,
)

from .controlplane import ControlPlane, write_kubeconfig
from .helm import Helm

__all__ = [
    "CRD_FILE",
    "RBAC_KINDS",
    "RESTRICTED",
    "SWARMS",
    "RealCluster",
    "apply",
    "chart_rbac",
    "collection",
    "create_namespace",
    "establish_crd",
    "install_crd",
    "service_account_token",
]


class RealCluster:
    """What the operator scenarios need of a cluster, on the real control plane."""

    def __init__(
        self,
        plane: ControlPlane,
        namespace: str,
        kubeconfig: Path,
        user: str,
        rbac: list[dict[str, Any]],
        token: str,
    ) -> None:
        self.plane = plane
        self.namespace = namespace
        self.url = plane.url
        self.kubeconfig = kubeconfig
        self.operator_user = user
        self.rbac = rbac
        #: The operator's ServiceAccount token (what its kubeconfig holds).
        self.token = token
        #: Further namespaces the release watches (``create(more_namespaces=...)``).
        self.also: list[str] = []
        self.http = plane.async_client()

    @classmethod
    def create(
        cls, plane: ControlPlane, helm: Helm, workdir: Path, prefix: str = "t", *, more_namespaces: int = 0
    ) -> RealCluster:
        """A namespace with the chart's RBAC; ``more_namespaces`` further namespaces the same release
        watches too (``rbac.watchNamespaces`` naming them all), in :attr:`also`."""
        namespace = f"{prefix}-{uuid.uuid4().hex[:8]}"
        also = [f"{prefix}-{uuid.uuid4().hex[:8]}" for _ in range(more_namespaces)]
        for ns in (namespace, *also):
            create_namespace(plane, ns)
        release = f"r{uuid.uuid4().hex[:6]}"
        values = {"rbac.watchNamespaces": "{" + ",".join((namespace, *also)) + "}"} if also else None
        docs = chart_rbac(helm, release, namespace, values)
        with plane.client() as http:
            for doc in docs:
                apply(http, doc, doc["metadata"].get("namespace") or namespace)
        account = next(d for d in docs if d["kind"] == "ServiceAccount")["metadata"]["name"]
        token = service_account_token(plane, namespace, account)
        config = write_kubeconfig(workdir / "operator.kubeconfig", plane.url, plane.ca.cert, token=token)
        made = cls(plane, namespace, config, f"system:serviceaccount:{namespace}:{account}", docs, token)
        made.also = also
        return made

    def operator_client(self, agent: str = "agentihooks-operator/test") -> Any:
        """The operator's own Kubernetes client, logged in as the operator's identity."""
        from agentihooks_operator.k8s.client import KubeClient

        return KubeClient(self.url, token=self.token, ca_path=str(self.plane.ca.cert), agent=agent)

    async def close(self) -> None:
        """Delete the namespace (its objects go with it) and the release's cluster-scoped RBAC."""
        for doc in self.rbac:
            if doc["kind"] in ("ClusterRole", "ClusterRoleBinding"):
                await self.http.delete(f"{collection(doc)}/{doc['metadata']['name']}")
        for ns in (self.namespace, *self.also):
            await self.http.delete(f"/api/v1/namespaces/{ns}")
        await self.http.aclose()

    # -- audit -----------------------------------------------------------------------------------
    def _operator_events(self) -> list[dict[str, Any]]:
        return [
            e
            for e in self.plane.audit_events()
            if (e.get("user") or {}).get("username") == self.operator_user
        ]

    @staticmethod
    def _call(event: dict[str, Any]) -> tuple[str, str, str]:
        ref = event.get("objectRef") or {}
        resource = ref.get("resource", "") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        return str(event["verb"]), str(ref.get("apiGroup") or ""), resource

    def operator_calls(self) -> set[tuple[str, str, str]]:
        """(verb, group, resource) of every request the operator's identity made."""
        return {self._call(e) for e in self._operator_events() if e.get("objectRef")}

    def denied_calls(self) -> set[tuple[str, str, str]]:
        """The operator's requests that RBAC refused (403)."""
        return {
            self._call(e)
            for e in self._operator_events()
            if e.get("objectRef") and (e.get("responseStatus") or {}).get("code") == 403
        }

    def calls_by(self, agent: str) -> list[tuple[str, str, str]]:
        return [
            self._call(e)
            for e in self._operator_events()
            if e.get("objectRef") and str(e.get("userAgent") or "").startswith(agent)
        ]

    def count(self, verb: str, resource: str, name_prefix: str = "") -> int:
        n = 0
        for e in self._operator_events():
            ref = e.get("objectRef") or {}
            call = self._call(e)
            if call[0] == verb and call[2] == resource and str(ref.get("name") or "").startswith(name_prefix):
                n += 1
        return n

    def created(self, resource: str, name_prefix: str = "") -> int:
        """Objects the operator's identity really created (answered 2xx): a create cut off by a kill,
        refused, or retried into ``409 AlreadyExists`` made nothing, and is not counted."""
        n = 0
        for e in self._operator_events():
            ref = e.get("objectRef") or {}
            code = int((e.get("responseStatus") or {}).get("code") or 0)
            call = self._call(e)
            if call[0] == "create" and call[2] == resource and 200 <= code < 300:
                n += str(ref.get("name") or "").startswith(name_prefix)
        return n

    # -- objects ---------------------------------------------------------------------------------
    async def create_swarm(
        self, name: str, spec: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        ns = namespace or self.namespace
        r = await self.http.post(SWARMS.format(ns=ns), json=swarm_body(name, spec, ns))
        if r.status_code >= 400:
            raise AssertionError(f"Swarm {name} refused: {r.status_code} {r.text}")
        return dict(r.json())

    async def get(self, path: str) -> dict[str, Any] | None:
        r = await self.http.get(path.replace("/namespaces/default/", f"/namespaces/{self.namespace}/"))
        if r.status_code == 404:
            return None
        r.raise_for_status()
        return dict(r.json())

    async def swarm(self, name: str, namespace: str | None = None) -> dict[str, Any]:
        found = await self.get(SWARMS.format(ns=namespace or self.namespace) + f"/{name}")
        assert found is not None
        return found

    async def columns(self, name: str) -> dict[str, Any]:
        """A Swarm's printer columns, wide ones included, as ``kubectl get swarms -o wide`` reads them
        (the API server's Table answer)."""
        r = await self.http.get(
            SWARMS.format(ns=self.namespace) + f"/{name}",
            headers={"Accept": "application/json;as=Table;g=meta.k8s.io;v=v1"},
        )
        r.raise_for_status()
        table = r.json()
        [row] = table["rows"]
        return {c["name"]: cell for c, cell in zip(table["columnDefinitions"], row["cells"], strict=True)}

    async def items(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        r = await self.http.get(f"/api/v1/namespaces/{namespace or self.namespace}/{resource}")
        r.raise_for_status()
        return list(r.json()["items"])

    async def pods(self, swarm: str | None = None, namespace: str | None = None) -> list[dict[str, Any]]:
        params = {"labelSelector": f"swarm.agentihooks.io/swarm={swarm}"} if swarm else None
        r = await self.http.get(f"/api/v1/namespaces/{namespace or self.namespace}/pods", params=params)
        r.raise_for_status()
        pods = [p for p in r.json()["items"] if "deletionTimestamp" not in p["metadata"]]
        return sorted(pods, key=lambda p: int(p["metadata"]["labels"]["swarm.agentihooks.io/generation"]))

    async def events(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return await self.items("events", namespace)


def swarm_body(name: str, spec: Any, namespace: str | None = None) -> dict[str, Any]:
    """A Swarm object as a client posts it (``namespace`` left to the URL when not given)."""
    meta: dict[str, Any] = {"name": name} if namespace is None else {"name": name, "namespace": namespace}
    return {"apiVersion": "agentihooks.io/v1alpha1", "kind": "Swarm", "metadata": meta, "spec": spec}
