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
