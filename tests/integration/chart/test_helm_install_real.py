"""``helm install`` of the chart into the real control plane: every object it renders is accepted.

For the chart's defaults and each value set in ``ci/``, the pinned helm installs a release as the
control plane's admin into a fresh namespace that enforces Pod Security ``restricted`` (and creates
the other namespaces a value set watches), without waiting for readiness (nothing can become ready:
there is no scheduler and no kubelet runs these images). What the real API server has to say about
the chart is then on record: schema validation of every kind, RBAC objects (an escalation check:
the admin may grant them), the CRD-typed ServiceMonitor, and admission of the Pods that
kube-controller-manager makes from the Deployment and the StatefulSet (a Pod that ``restricted``
refuses never appears; the ReplicaSet reports it instead). Every object of the release's manifest
is read back from the API. ``helm uninstall`` then succeeds: the release's objects go, the garbage
collector takes their ReplicaSets and Pods, and what the chart promises to keep is kept (the
checkpoint claim, ``helm.sh/resource-policy: keep``, and the Redis data claim, retained by the
StatefulSet's claim retention policy).

The ServiceMonitor and PrometheusRule CRDs of the Prometheus Operator do not exist on a bare control
plane; this module installs minimal ones (group, names, scope and the fields the chart writes typed as
upstream types them, durations with upstream's pattern) so that the bucket-store value set's
ServiceMonitor and PrometheusRule (``prometheusRule.enabled=true``) are validated instead of skipped.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from testsupport.controlplane import ControlPlane
from testsupport.helm import CHART, Helm, value_sets
from testsupport.prometheus import PROMETHEUS_RULE_CRD
from testsupport.realcluster import create_namespace, establish_crd

pytestmark = pytest.mark.slow

#: Prometheus durations, as the Prometheus Operator's CRDs type them.
DURATION = "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
LABEL_SELECTOR = {
    "type": "object",
    "properties": {
        "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
        "matchExpressions": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["key", "operator"],
                "properties": {
                    "key": {"type": "string"},
                    "operator": {"type": "string"},
                    "values": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
    },
    "x-kubernetes-map-type": "atomic",
}
SERVICE_MONITOR_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
    "spec": {
        "group": "monitoring.coreos.com",
        "names": {
            "kind": "ServiceMonitor",
            "listKind": "ServiceMonitorList",
            "plural": "servicemonitors",
            "singular": "servicemonitor",
            "shortNames": ["smon"],
        },
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "required": ["spec"],
                        "properties": {
                            "apiVersion": {"type": "string"},
                            "kind": {"type": "string"},
                            "metadata": {"type": "object"},
                            "spec": {
                                "type": "object",
                                "required": ["selector"],
                                # upstream types many more fields; this minimal CRD keeps them unchecked
                                "x-kubernetes-preserve-unknown-fields": True,
                                "properties": {
                                    "selector": LABEL_SELECTOR,
                                    "namespaceSelector": {
                                        "type": "object",
                                        "properties": {
                                            "any": {"type": "boolean"},
                                            "matchNames": {"type": "array", "items": {"type": "string"}},
                                        },
                                    },
                                    "endpoints": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "x-kubernetes-preserve-unknown-fields": True,
                                            "properties": {
                                                "port": {"type": "string"},
                                                "path": {"type": "string"},
                                                "scheme": {"type": "string", "enum": ["http", "https"]},
                                                "interval": {"type": "string", "pattern": DURATION},
                                                "scrapeTimeout": {"type": "string", "pattern": DURATION},
                                            },
                                        },
                                    },
                                },
                            },
                        },
                    }
                },
            }
        ],
    },
}

#: The chart's defaults, then every value set of ci/ (default-values.yaml is ``{}``, kept for CI parity),
#: and the default values under the longest release name Helm accepts (53 characters: every name the
#: chart makes from it must still fit, the Redis StatefulSet's within 52 so its Pod is made).
INSTALLS: dict[str, Path | None] = {
    "chart-defaults": None,
    **value_sets(),
    "long-release-name": value_sets()["default"],
    # the same install with Helm 3 (v3.17.2): the chart supports both majors
    "default-helm3": value_sets()["default"],
}


@pytest.fixture(scope="module")
def service_monitor_crd(control_plane: ControlPlane) -> Iterator[None]:
    """The ServiceMonitor and PrometheusRule CRDs, established and served."""
    crds = (SERVICE_MONITOR_CRD, PROMETHEUS_RULE_CRD)
    with control_plane.client() as http:
        for crd in crds:
            establish_crd(http, crd)
    yield
    with control_plane.client() as http:
        for crd in crds:
            http.delete(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}")


class Api:
    """Paths of objects by their apiVersion and kind, found through the API server's discovery."""

    def __init__(self, http: httpx.Client) -> None:
        self.http = http
        self._resources: dict[str, dict[str, tuple[str, bool]]] = {}

    def _kinds(self, api_version: str) -> dict[str, tuple[str, bool]]:
        if api_version not in self._resources:
            base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
            r = self.http.get(base)
            assert r.status_code == 200, f"{api_version} is not served: {r.status_code}"
            self._resources[api_version] = {
                res["kind"]: (f"{base}/{res['name']}", bool(res["namespaced"]))
                for res in r.json()["resources"]
                if "/" not in res["name"]
            }
        return self._resources[api_version]

    def path(self, doc: dict[str, Any], namespace: str) -> str:
        collection, namespaced = self._kinds(doc["apiVersion"])[doc["kind"]]
        meta = doc["metadata"]
        if namespaced:
            ns = meta.get("namespace") or namespace
            prefix, rest = collection.rsplit("/", 1)
            collection = f"{prefix}/namespaces/{ns}/{rest}"
        return f"{collection}/{meta['name']}"

    def get(self, doc: dict[str, Any], namespace: str) -> dict[str, Any] | None:
        r = self.http.get(self.path(doc, namespace))
        if r.status_code == 404:
            return None
        r.raise_for_status()
        return dict(r.json())


def wait_for(check: Any, what: str, timeout: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.25)


def helm_ok(helm: Helm, *args: str) -> str:
    res = helm.run(*args)
    assert res.returncode == 0, f"helm {args[0]} failed:\n{res.stderr.strip()}"
    return res.stdout


def pods(http: httpx.Client, namespace: str, selector: dict[str, str]) -> list[dict[str, Any]]:
    labels = ",".join(f"{k}={v}" for k, v in selector.items())
    r = http.get(f"/api/v1/namespaces/{namespace}/pods", params={"labelSelector": labels})
    r.raise_for_status()
    return list(r.json()["items"])


def owned_by(obj: dict[str, Any], owner: dict[str, Any]) -> bool:
    return any(
        ref.get("uid") == owner["metadata"]["uid"] for ref in obj["metadata"].get("ownerReferences") or []
    )


def replica_failure(rs: dict[str, Any]) -> str | None:
    for cond in (rs.get("status") or {}).get("conditions") or []:
        if cond["type"] == "ReplicaFailure" and cond["status"] == "True":
            return str(cond.get("message"))
    return None


def check_deployment(http: httpx.Client, api: Api, namespace: str, doc: dict[str, Any]) -> None:
    """kube-controller-manager made the Deployment's ReplicaSet, and the ReplicaSet its Pods (admitted)."""
    deployment = api.get(doc, namespace)
    assert deployment is not None
    replicas = int(doc["spec"].get("replicas", 1))

    def replica_set() -> dict[str, Any] | None:
        r = http.get(f"/apis/apps/v1/namespaces/{namespace}/replicasets")
        r.raise_for_status()
        return next((rs for rs in r.json()["items"] if owned_by(rs, deployment)), None)

    rs = wait_for(replica_set, f"the ReplicaSet of Deployment {doc['metadata']['name']}")

    def made() -> list[dict[str, Any]] | None:
        current = http.get(
            f"/apis/apps/v1/namespaces/{namespace}/replicasets/{rs['metadata']['name']}"
        ).json()
        failure = replica_failure(current)
        assert failure is None, f"the ReplicaSet cannot create the operator's Pods: {failure}"
        found = [p for p in pods(http, namespace, doc["spec"]["selector"]["matchLabels"]) if owned_by(p, rs)]
        return found if len(found) == replicas else None

    made_pods = wait_for(made, f"{replicas} operator Pod(s)")
    for pod in made_pods:
        assert pod["spec"]["serviceAccountName"] == doc["spec"]["template"]["spec"]["serviceAccountName"]
        assert pod["status"]["phase"] == "Pending"  # no scheduler here: admitted, never started


def check_statefulset(http: httpx.Client, api: Api, namespace: str, doc: dict[str, Any]) -> str:
    """The StatefulSet controller made its claim and its Pod ``<name>-0``; returns the claim's name."""
    sts = api.get(doc, namespace)
    assert sts is not None
    name = doc["metadata"]["name"]

    def pod() -> dict[str, Any] | None:
        r = http.get(f"/api/v1/namespaces/{namespace}/pods/{name}-0")
        if r.status_code == 404:
            events = http.get(
                f"/api/v1/namespaces/{namespace}/events",
                params={"fieldSelector": f"involvedObject.name={name},reason=FailedCreate"},
            ).json()["items"]
            assert not events, f"the StatefulSet cannot create its Pod: {events[0]['message']}"
            return None
        r.raise_for_status()
        return dict(r.json())

    made = wait_for(pod, f"Pod {name}-0 of the StatefulSet")
    assert owned_by(made, sts)
    claim = f"{doc['spec']['volumeClaimTemplates'][0]['metadata']['name']}-{name}-0"
    assert http.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim}").status_code == 200
    return claim


def watched_namespaces(values: Path | None) -> list[str]:
    doc = yaml.safe_load(values.read_text()) if values is not None else None
    return list(((doc or {}).get("rbac") or {}).get("watchNamespaces") or [])


@pytest.mark.parametrize(("install", "values"), list(INSTALLS.items()), ids=list(INSTALLS))
def test_helm_install_and_uninstall_on_the_real_api_server(
    control_plane: ControlPlane,
    request: pytest.FixtureRequest,
    service_monitor_crd: None,
    install: str,
    values: Path | None,
) -> None:
    helm: Helm = request.getfixturevalue("helm3" if install.endswith("-helm3") else "helm")
    # --wait=hookOnly is Helm 4's spelling of no readiness wait; Helm 3 does not wait unless asked
    no_wait = () if install.endswith("-helm3") else ("--wait=hookOnly",)
    namespace = f"helm-{uuid.uuid4().hex[:8]}"
    release = f"h{uuid.uuid4().hex[:6]}"
    if install == "long-release-name":
        release = f"recovery-operator-staging-{uuid.uuid4().hex}"[:53]
    create_namespace(control_plane, namespace)
    extra = [ns for ns in watched_namespaces(values) if ns != namespace]
    for ns in extra:
        create_namespace(control_plane, ns)
    kube = ("--namespace", namespace, "--kubeconfig", str(control_plane.admin_kubeconfig))
    if values is None:  # the chart alone: it will not watch its own namespace, and says which value to give
        refused = helm.run("install", release, str(CHART), *kube, "--wait=hookOnly")
        assert refused.returncode != 0 and "rbac.watchNamespaces is empty" in refused.stderr
        assert helm.run("status", release, *kube).returncode != 0, "nothing was installed"
        return
    files = ("--values", str(values))
    try:
        with control_plane.client() as http:
            api = Api(http)
            # --wait=hookOnly is helm 4's spelling of --wait=false: no readiness wait, hooks only.
            # --no-hooks: the session's Swarm CRD was applied by hand, so the chart would take it over
            # with a hook Job no kubelet runs here (the chart-on-real-node flow runs that hook)
            helm_ok(helm, "install", release, str(CHART), *kube, *files, *no_wait, "--no-hooks")
            assert "STATUS: deployed" in helm_ok(helm, "status", release, *kube)
            manifest = [d for d in yaml.safe_load_all(helm_ok(helm, "get", "manifest", release, *kube)) if d]
            kinds = {d["kind"] for d in manifest}
            assert {"Deployment", "ServiceAccount", "Service"} <= kinds
            for doc in manifest:
                found = api.get(doc, namespace)
                assert found is not None, f"{doc['kind']} {doc['metadata']['name']} is not in the API"
                assert found["metadata"]["labels"]["app.kubernetes.io/instance"] == release
            if values is not None and "serviceMonitor" in values.read_text():
                assert "ServiceMonitor" in kinds
            if values is not None and "prometheusRule" in values.read_text():
                assert "PrometheusRule" in kinds
                rule = next(d for d in manifest if d["kind"] == "PrometheusRule")
                stored = api.get(rule, namespace)
                assert stored is not None and stored["spec"] == rule["spec"], "nothing pruned or refused"
                bad = {**rule, "metadata": {"name": "typo", "namespace": namespace}}
                typo = {"alert": "A", "expr": "1", "for": "5 min"}
                bad["spec"] = {"groups": [{"name": "g", "rules": [typo]}]}
                refused = http.post(
                    f"/apis/monitoring.coreos.com/v1/namespaces/{namespace}/prometheusrules", json=bad
                )
                assert refused.status_code == 422, "the typed CRD checks what the chart writes"

            kept: list[tuple[str, dict[str, Any]]] = []
            for doc in manifest:
                if doc["kind"] == "Deployment":
                    check_deployment(http, api, namespace, doc)
                elif doc["kind"] == "StatefulSet":
                    claim = check_statefulset(http, api, namespace, doc)
                    kept.append(
                        (
                            claim,
                            {
                                "apiVersion": "v1",
                                "kind": "PersistentVolumeClaim",
                                "metadata": {"name": claim},
                            },
                        )
                    )
                annotations = doc["metadata"].get("annotations") or {}
                if annotations.get("helm.sh/resource-policy") == "keep":
                    kept.append((doc["metadata"]["name"], doc))

            # --no-hooks: the pre-delete hook's Job would wait for a Pod no kubelet runs here; the hook
            # itself is exercised by test_uninstall_real.py, with a stand-in kubelet running its Pod
            helm_ok(helm, "uninstall", release, *kube, *no_wait, "--no-hooks")
            assert helm.run("status", release, *kube).returncode != 0, "the release is gone"
            removed = [
                d
                for d in manifest
                if ((d["metadata"].get("annotations") or {}).get("helm.sh/resource-policy") != "keep")
            ]

            def all_removed() -> bool:
                return all(
                    (found := api.get(d, namespace)) is None or "deletionTimestamp" in found["metadata"]
                    for d in removed
                )

            wait_for(all_removed, "the release's objects removed")
            # the garbage collector follows the owner references: ReplicaSets and their Pods go too
            wait_for(
                lambda: (
                    not http.get(f"/api/v1/namespaces/{namespace}/pods").json()["items"]
                    and not http.get(f"/apis/apps/v1/namespaces/{namespace}/replicasets").json()["items"]
                ),
                "the workloads' Pods and ReplicaSets collected",
            )
            for name, doc in kept:
                found = api.get(doc, namespace)
                assert found is not None and "deletionTimestamp" not in found["metadata"], (
                    f"{doc['kind']} {name} is kept on uninstall, as the chart says"
                )
    finally:
        with control_plane.client() as http:  # the watched namespaces are shared by the value sets: kept
            http.delete(f"/api/v1/namespaces/{namespace}")
