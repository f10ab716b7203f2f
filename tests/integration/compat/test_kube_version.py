"""The control plane under the tests is the Kubernetes version the run asked for.

``make test`` runs the whole suite on the pinned version and then the compatibility tier (the
Makefile's ``COMPAT_TESTS``) again on the oldest minor docs/install.md claims, by setting
``AGENTIHOOKS_KUBE_VERSION`` for ``scripts/control-plane.sh``. This test is in both runs: it fails if
the tier ever ran on another API server than the one it claims to have tested.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from testsupport.controlplane import ControlPlane

REPO = Path(__file__).resolve().parents[3]


def _pinned() -> str:
    script = (REPO / "scripts" / "control-plane.sh").read_text()
    found = re.search(r'KUBE_VERSION="\$\{AGENTIHOOKS_KUBE_VERSION:-(v[0-9.]+)\}"', script)
    assert found, "scripts/control-plane.sh no longer names its pinned version"
    return found.group(1)


def test_the_api_server_is_the_version_asked_for(control_plane: ControlPlane) -> None:
    wanted = os.environ.get("AGENTIHOOKS_KUBE_VERSION") or _pinned()
    with control_plane.client() as http:
        served = http.get("/version").json()
    assert served["gitVersion"] == wanted, served


def _makefile(name: str) -> str:
    found = re.search(rf"^{name} \??= (\S+)$", (REPO / "Makefile").read_text(), re.MULTILINE)
    assert found, f"the Makefile no longer sets {name}"
    return found.group(1)


def test_the_compatibility_tier_is_the_oldest_minor_the_chart_accepts_and_the_docs_claim() -> None:
    compat = _makefile("COMPAT_KUBE_VERSION")
    minor = ".".join(compat.lstrip("v").split(".")[:2])
    chart = (REPO / "charts" / "agentihooks-recovery" / "Chart.yaml").read_text()
    assert f'kubeVersion: ">={minor}.0-0"' in chart, "Chart.yaml's floor is not the tier's minor"
    install = (REPO / "docs" / "install.md").read_text()
    assert f"| {minor} | tested" in install, f"docs/install.md does not list {minor} as tested"
    assert compat in install, f"docs/install.md does not name the tier's version {compat}"
