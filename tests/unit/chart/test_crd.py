"""The chart's Swarm CRD is the operator's, and the example Swarm satisfies it."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from agentihooks_operator.k8s.crd import crd_manifest
from agentihooks_operator.swarm import SwarmSpec
from testsupport.helm import CHART, ROOT

CRD_FILE = CHART / "files" / "crds" / "swarms.agentihooks.io.yaml"
EXAMPLE = ROOT / "deploy" / "examples" / "swarm.yaml"


def _chart_crd() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(CRD_FILE.read_text())
    return doc


def test_chart_crd_equals_the_operators_source_of_truth() -> None:
    assert _chart_crd() == crd_manifest(), "CRD drifted from SwarmSpec: run scripts/gen-crd.py"


def test_gen_crd_check_passes_and_detects_drift(tmp_path: Path) -> None:
    script = ROOT / "scripts" / "gen-crd.py"
    ok = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    stale_copy = tmp_path / "crd.yaml"
    stale_copy.write_text(CRD_FILE.read_text().replace("minLength: 1", "minLength: 2", 1))
    stale = subprocess.run(
        [sys.executable, str(script), "--check", "--target", str(stale_copy)], capture_output=True, text=True
    )
    assert stale.returncode == 1
    assert "is stale: run scripts/gen-crd.py" in stale.stderr
    regenerated = subprocess.run(
        [sys.executable, str(script), "--target", str(stale_copy)], capture_output=True
    )
    assert regenerated.returncode == 0
    assert stale_copy.read_text() == CRD_FILE.read_text()


@pytest.mark.parametrize("version", ["1.30.0", "1.35.0"])
def test_crd_is_a_valid_kubernetes_object(version: str) -> None:
    kubernetes_validate.validate(_chart_crd(), version, strict=True)


def _to_json_schema(node: Any) -> Any:
    """OpenAPI v3.0 (as in CRDs) to a Draft 4 JSON Schema, with every object closed.

    Closing objects mirrors kubectl's default strict field validation, which rejects unknown fields
    instead of letting the API server prune them silently.
    """
    if isinstance(node, list):
        return [_to_json_schema(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _to_json_schema(v) for k, v in node.items() if not k.startswith("x-kubernetes")}
    if node.get("nullable"):
        out.pop("nullable")
        out["type"] = [node["type"], "null"]
    if (
        node.get("type") == "object"
        and "properties" in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def _validator() -> jsonschema.Draft4Validator:
    schema = _chart_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    js = _to_json_schema(schema)
    jsonschema.Draft4Validator.check_schema(js)
    return jsonschema.Draft4Validator(js)


def _example() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    return doc


def test_example_swarm_matches_the_crd_schema() -> None:
    doc = _example()
    assert doc["apiVersion"] == "agentihooks.io/v1alpha1" and doc["kind"] == "Swarm"
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in _validator().iter_errors(doc)]
    assert errors == []
    SwarmSpec.model_validate(doc["spec"])


def _broken(path: list[Any], value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(_example())
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (["spec", "seats", 0, "colour"], "blue"),
        (["spec", "recovery", "automation"], "yes"),
        (["spec", "seats", 0, "name"], "Eng_1"),
        (["spec", "harness", "name"], "gemini"),
        (["spec", "harness", "command"], []),
        (["spec", "recovery", "passIntervalSeconds"], 0),
        (["spec", "seats"], []),
    ],
    ids=[
        "unknown field",
        "wrong type",
        "bad seat name",
        "unknown harness",
        "empty command",
        "zero interval",
        "no seats",
    ],
)
def test_a_broken_swarm_is_rejected_by_the_crd_schema(path: list[Any], value: Any) -> None:
    assert list(_validator().iter_errors(_broken(path, value)))


def _properties(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every property of a schema, with its path (array items as ``[]``, map values as ``{}``)."""
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        for name, child in (node.get("properties") or {}).items():
            found.append((f"{path}.{name}", child))
            found += _properties(child, f"{path}.{name}")
        if isinstance(node.get("items"), dict):
            found += _properties(node["items"], f"{path}[]")
        if isinstance(node.get("additionalProperties"), dict):
            found += _properties(node["additionalProperties"], f"{path}{{}}")
    return found


def test_every_property_of_the_crd_has_a_description() -> None:
    """What `kubectl explain swarm.<path>` prints: no field is left without a word."""
    schema = _chart_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    props = _properties(schema)
    assert len(props) > 500, "the Pod template's Kubernetes fields are walked too"
    missing = [path for path, node in props if not str(node.get("description") or "").strip()]
    # the API server refuses a description on `metadata` (it is the standard ObjectMeta)
    assert missing == [".metadata"]
    assert schema["properties"]["spec"]["description"]
    markup = [path for path, node in props if ":data:" in str(node.get("description")) or "``" in str(node)]
    assert markup == [], "descriptions are plain text, not reStructuredText"


def test_descriptions_come_from_the_model() -> None:
    """Each field of every Swarm model has a docstring, and the CRD says what the docstring says."""
    from pydantic import BaseModel

    seen: set[type[BaseModel]] = set()
    todo: list[type[BaseModel]] = [SwarmSpec]
    while todo:
        model = todo.pop()
        seen.add(model)
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no docstring"
            for arg in (*getattr(field.annotation, "__args__", ()), field.annotation):
                for t in getattr(arg, "__args__", (arg,)):
                    if isinstance(t, type) and issubclass(t, BaseModel) and t not in seen:
                        todo.append(t)
    assert len(seen) >= 8
    spec = _chart_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    shown = spec["properties"]["recovery"]["properties"]["passIntervalSeconds"]["description"]
    from agentihooks_operator.swarm import RecoverySpec

    docstring = RecoverySpec.model_fields["pass_interval_seconds"].description or ""
    assert shown == " ".join(docstring.split())
