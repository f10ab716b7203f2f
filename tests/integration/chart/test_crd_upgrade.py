"""The CRD upgrade step of docs/install.md, run as written on the real API server.

Helm installs ``crds/`` once and never upgrades it, so a release that changes
the Swarm schema asks for ``kubectl apply --server-side --force-conflicts -f
<the chart's crds/ file>`` before ``helm upgrade``. Here an earlier release's
CRD (no Ready printer columns, conditions an atomic list) is created the way
Helm creates it, a Swarm is stored under it, and the documented command brings
the CRD to the chart's: the columns serve, the Swarm is kept, and running the
command again changes nothing. The CRD is the chart's under a group of its own,
so the session's Swarm CRD is not touched.
"""

from __future__ import annotations

import copy
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from testsupport.controlplane import ControlPlane
from testsupport.helm import find_tool

from ..operator.conftest import swarm_spec

CRD_FILE = (
    Path(__file__).resolve().parents[3]
    / "charts"
    / "agentihooks-recovery"
    / "files"
    / "crds"
    / "swarms.agentihooks.io.yaml"
)
GROUP = "upgrade.agentihooks.io"
NAME = f"swarms.{GROUP}"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
pytestmark = pytest.mark.slow


def _ours(doc: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    doc["metadata"]["name"], doc["spec"]["group"] = NAME, GROUP
    return doc


def _earlier(doc: dict[str, Any]) -> dict[str, Any]:
    """The CRD as the release before this one shipped it."""
    doc = _ours(doc)
    [version] = doc["spec"]["versions"]
    version["additionalPrinterColumns"] = [
        c for c in version["additionalPrinterColumns"] if c["name"] not in ("Ready", "Reason", "Status")
    ]
    conds = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["conditions"]
    conds.pop("x-kubernetes-list-type", None)
    conds.pop("x-kubernetes-list-map-keys", None)
    return doc


def _columns(http: Any) -> list[str]:
    crd = http.get(f"{CRDS}/{NAME}").json()
    return [c["name"] for c in crd["spec"]["versions"][0]["additionalPrinterColumns"]]


def _established(http: Any, generation: int) -> None:
    deadline = time.monotonic() + 30
    while True:
        crd = http.get(f"{CRDS}/{NAME}").json()
        conds = {c["type"]: c["status"] for c in crd.get("status", {}).get("conditions") or []}
        if conds.get("Established") == "True" and crd["metadata"]["generation"] >= generation:
            return
        assert time.monotonic() < deadline, crd.get("status")
        time.sleep(0.1)


def test_the_documented_apply_upgrades_the_crd(control_plane: ControlPlane, tmp_path: Path) -> None:
    kubectl = find_tool("kubectl")
    chart = yaml.safe_load(CRD_FILE.read_text())
    new = tmp_path / "crds" / CRD_FILE.name
    new.parent.mkdir()
    new.write_text(yaml.safe_dump(_ours(chart), sort_keys=False))
    with control_plane.client() as http:
        try:
            r = http.post(CRDS, json=_earlier(chart), params={"fieldManager": "helm"})  # as helm install
            assert r.status_code == 201, r.text
            _established(http, 1)
            served = f"/apis/{GROUP}/v1alpha1/namespaces/default/swarms"
            deadline = time.monotonic() + 30
            while (made := http.post(served, json=_swarm())).status_code == 404:
                assert time.monotonic() < deadline, made.text
                time.sleep(0.2)
            assert made.status_code == 201, made.text
            assert "Ready" not in _columns(http)

            def apply() -> subprocess.CompletedProcess[str]:
                argv = [str(kubectl), "--kubeconfig", str(control_plane.admin_kubeconfig), "apply"]
                argv += ["--server-side", "--force-conflicts", "-f", str(new)]
                env = {**os.environ, "HOME": str(tmp_path)}
                return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)

            done = apply()
            assert done.returncode == 0, done.stderr
            assert "serverside-applied" in done.stdout
            generation = http.get(f"{CRDS}/{NAME}").json()["metadata"]["generation"]
            _established(http, generation)
            assert _columns(http) == [
                c["name"] for c in chart["spec"]["versions"][0]["additionalPrinterColumns"]
            ]
            stored = http.get(f"{CRDS}/{NAME}").json()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
            conds = stored["properties"]["status"]["properties"]["conditions"]
            assert conds["x-kubernetes-list-type"] == "map"
            kept = http.get(f"{served}/example")
            assert kept.status_code == 200 and kept.json()["spec"]["seats"][0]["name"] == "eng-1"
            again = apply()
            assert again.returncode == 0, again.stderr
            assert http.get(f"{CRDS}/{NAME}").json()["metadata"]["generation"] == generation
        finally:
            http.delete(f"{CRDS}/{NAME}")


def _swarm() -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "Swarm",
        "metadata": {"name": "example"},
        "spec": swarm_spec(),
    }


ADOPT_GROUP = "adopt.agentihooks.io"
ADOPT_NAME = f"swarms.{ADOPT_GROUP}"


def test_the_take_over_hook_applies_the_crd_and_makes_it_the_releases(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """``agentihooks-operator --adopt-crd`` (the chart's hook when the CRD exists but is not the
    release's): an earlier chart's CRD, installed from its ``crds/`` folder and holding a Swarm, is
    brought to this chart's schema and marked as the release's (what Helm checks before it upgrades
    it); the Swarm is kept; a second run changes nothing; a file that is not a CRD is refused."""
    from agentihooks_operator.crd_adopt import AdoptError, adopt, read_crd
    from agentihooks_operator.k8s.client import KubeClient

    chart = yaml.safe_load(CRD_FILE.read_text())
    ours = copy.deepcopy(chart)
    ours["metadata"]["name"], ours["spec"]["group"] = ADOPT_NAME, ADOPT_GROUP
    earlier = copy.deepcopy(ours)
    [version] = earlier["spec"]["versions"]
    version["additionalPrinterColumns"] = [
        c for c in version["additionalPrinterColumns"] if c["name"] not in ("Ready", "Reason", "Status")
    ]
    path = f"{CRDS}/{ADOPT_NAME}"
    kube = KubeClient.from_environment(kubeconfig=str(control_plane.admin_kubeconfig))
    with control_plane.client() as http:
        try:
            assert http.post(CRDS, json=earlier, params={"fieldManager": "helm"}).status_code == 201
            served = f"/apis/{ADOPT_GROUP}/v1alpha1/namespaces/default/swarms"
            deadline = time.monotonic() + 30
            body = {**_swarm(), "apiVersion": f"{ADOPT_GROUP}/v1alpha1"}
            while (made := http.post(served, json=body)).status_code == 404:
                assert time.monotonic() < deadline, made.text
                time.sleep(0.2)
            assert made.status_code == 201, made.text

            adopt(kube, ours, release="rel", namespace="ah-system", keep=True)
            crd = http.get(path).json()
            meta = crd["metadata"]
            assert meta["labels"]["app.kubernetes.io/managed-by"] == "Helm"
            assert meta["annotations"]["meta.helm.sh/release-name"] == "rel"
            assert meta["annotations"]["meta.helm.sh/release-namespace"] == "ah-system"
            assert meta["annotations"]["helm.sh/resource-policy"] == "keep"
            columns = [c["name"] for c in crd["spec"]["versions"][0]["additionalPrinterColumns"]]
            assert "Ready" in columns, columns
            # the fields are Helm's own (its server-side apply manager): a later upgrade owns them
            assert {m["manager"] for m in meta["managedFields"] if m["operation"] == "Apply"} == {"helm"}
            assert http.get(f"{served}/example").status_code == 200, "the Swarm is kept"
            generation = meta["generation"]
            adopt(kube, ours, release="rel", namespace="ah-system", keep=True)
            assert http.get(path).json()["metadata"]["generation"] == generation

            bad = tmp_path / "not-a-crd.yaml"
            bad.write_text("kind: ConfigMap\nmetadata: {name: x}\n")
            with pytest.raises(AdoptError, match="is not a CustomResourceDefinition"):
                read_crd(bad)
        finally:
            http.delete(path)
            kube.close()


def test_adopt_crd_without_a_release_is_refused_naming_the_flag() -> None:
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "agentihooks_operator.main", "--adopt-crd", "/nonexistent.yaml"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and "--adopt-crd needs --release NAMESPACE/NAME" in done.stderr, done.stderr
