"""The Swarm CRD as part of the release (issue 47): installed and upgraded with it, kept on uninstall.

``helm template`` has no cluster to ask, so the CRD counts as absent and is rendered: what Argo CD and
Flux apply. Its body is the generated file, taken as text, so no schema value is re-serialized; the
take-over hook renders only where a live CRD belongs to no release or another one (its run on a real
cluster is in tests/integration/chart/test_chart_on_real_node.py and test_crd_adopt.py).
"""

from __future__ import annotations

from typing import Any

import yaml
from testsupport.helm import CHART, Helm

CRD_FILE = CHART / "files" / "crds" / "swarms.agentihooks.io.yaml"


def _crds(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == "CustomResourceDefinition"]


def test_the_crd_is_rendered_as_the_generated_file_with_the_release_labels_and_kept(helm: Helm) -> None:
    (crd,) = _crds(helm.render())
    generated = yaml.safe_load(CRD_FILE.read_text())
    assert crd["spec"] == generated["spec"] and crd["metadata"]["name"] == generated["metadata"]["name"]
    assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    labels = crd["metadata"]["labels"]
    assert labels["app.kubernetes.io/managed-by"] == "Helm" and labels["app.kubernetes.io/part-of"]
    # the schema's large integers come out as written, never as floats (the body is not re-serialized)
    rendered = helm.template(None).stdout
    for bound in ("maximum: 31536000", "maxLength: 253"):  # 3.1536e+07 if it went through a float
        assert bound in CRD_FILE.read_text() and bound in rendered


def test_crds_keep_false_lets_uninstall_delete_it_and_enabled_false_leaves_it_out(helm: Helm) -> None:
    (crd,) = _crds(helm.render({"crds": {"keep": False}}))
    assert "helm.sh/resource-policy" not in (crd["metadata"].get("annotations") or {})
    assert _crds(helm.render({"crds": {"enabled": False}})) == []


def test_no_take_over_hook_without_a_live_crd_to_take_over(helm: Helm) -> None:
    names = {(d["kind"], d["metadata"]["name"]) for d in helm.render()}
    assert not [n for n in names if n[1].endswith("-adopt-crd")], names


def test_a_bad_crd_value_is_refused_naming_it(helm: Helm) -> None:
    res = helm.template({"crds": {"keep": "yes"}})
    assert res.returncode != 0 and "crds" in res.stderr and "keep" in res.stderr, res.stderr
