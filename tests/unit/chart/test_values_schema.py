"""values.schema.json rejects wrong types and unknown keys, so a typo fails the install loudly."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
import yaml
from testsupport.helm import CHART, ROOT, Helm

SCHEMA = json.loads((CHART / "values.schema.json").read_text())

BAD_VALUES: list[tuple[str, dict[str, Any], str]] = [
    ("unknown top-level key", {"replicas": 2}, "replicas"),
    ("unknown nested key", {"operator": {"replica": 2}}, "replica"),
    ("unknown key in a list item", {"ingress": {"hosts": [{"host": "a", "paths": [], "tls": True}]}}, "tls"),
    ("replicas as text", {"operator": {"replicas": "two"}}, "/operator/replicas"),
    ("replicas zero", {"operator": {"replicas": 0}}, "/operator/replicas"),
    ("boolean as text", {"rbac": {"clusterWide": "yes"}}, "/rbac/clusterWide"),
    ("unknown redis mode", {"redis": {"mode": "sentinel"}}, "/redis/mode"),
    ("unknown store mode", {"checkpointStore": {"mode": "s3"}}, "/checkpointStore/mode"),
    (
        "relative checkpoint root",
        {"checkpointStore": {"root": {"path": "ckpt"}}},
        "/checkpointStore/root/path",
    ),
    ("password-like value in clear", {"redis": {"auth": {"password": "hunter2"}}}, "password"),
    (
        "annotation that is not a string",
        {"serviceAccount": {"annotations": {"a": 1}}},
        "/serviceAccount/annotations",
    ),
    ("bad port", {"operator": {"port": 70000}}, "/operator/port"),
    ("bad namespace name", {"rbac": {"watchNamespaces": ["Team_A"]}}, "/rbac/watchNamespaces"),
    ("bad quantity", {"operator": {"resources": {"limits": {"memory": "lots"}}}}, "/operator/resources"),
    ("typo inside a toleration", {"operator": {"tolerations": [{"keyy": "a"}]}}, "keyy"),
    ("typo inside an affinity", {"redis": {"embedded": {"affinity": {"nodeAfinity": {}}}}}, "nodeAfinity"),
    ("env var without a name", {"operator": {"extraEnv": [{"value": "x"}]}}, "/operator/extraEnv/0"),
    ("peer with a wrong type", {"networkPolicy": {"allowedFrom": [{"podSelector": "app=x"}]}}, "podSelector"),
    (
        "alert duration in words",
        {"prometheusRule": {"awaitingDecisionFor": "half an hour"}},
        "/prometheusRule/awaitingDecisionFor",
    ),
    (
        "alert threshold as text",
        {"prometheusRule": {"leaseChurnThreshold": "3"}},
        "/prometheusRule/leaseChurnThreshold",
    ),
    ("typo in the rule values", {"prometheusRule": {"enable": True}}, "enable"),
    (
        "dashboard label with a space",
        {"grafanaDashboard": {"label": "grafana dashboard"}},
        "/grafanaDashboard/label",
    ),
]


@pytest.mark.parametrize(("case", "values", "named"), BAD_VALUES, ids=[c[0] for c in BAD_VALUES])
def test_bad_values_are_rejected(helm: Helm, case: str, values: dict[str, Any], named: str) -> None:
    res = helm.template(values)
    assert res.returncode != 0, f"{case}: rendered anyway"
    assert "schema" in res.stderr.lower() or "at '" in res.stderr, res.stderr
    assert named in res.stderr, f"{case}: the error does not name {named!r}: {res.stderr}"
    assert not res.stdout.strip(), "nothing is rendered when values are rejected"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"redis": {"mode": "external"}}, "redis.external.url is empty"),
        (
            {"redis": {"mode": "external", "external": {"url": "redis://u:secret@host:6379/0"}}},
            "must not carry a password",
        ),
        ({"checkpointStore": {"mode": "bucket"}}, "checkpointStore.bucket.name is empty"),
        (
            {"operator": {"replicas": 2}, "checkpointStore": {"mode": "root"}},
            "needs a ReadWriteMany claim",
        ),
    ],
)
def test_inconsistent_values_fail_with_a_clear_message(
    helm: Helm, values: dict[str, Any], message: str
) -> None:
    res = helm.template(values)
    assert res.returncode != 0
    assert message in res.stderr
    assert "secret@" not in res.stderr, "a password in a rejected URL is never echoed"


def _object_schemas(node: Any, path: str = "$") -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        kinds = node.get("type")
        if "object" in (kinds if isinstance(kinds, list) else [kinds]):
            found.append((path, node))
        for key, value in node.items():
            found += _object_schemas(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _object_schemas(value, f"{path}[{i}]")
    return found


def test_every_object_in_the_schema_is_closed() -> None:
    """additionalProperties is set on every object, the embedded Kubernetes definitions included
    (only Helm's own `global`, shared with other charts, and Kubernetes' FieldsV1, the opaque
    managedFields blob an ephemeral volume's claim template could carry, stay open)."""
    objects = _object_schemas(SCHEMA)
    assert len(objects) > 40
    open_ones = [path for path, node in objects if "additionalProperties" not in node]
    assert open_ones == [
        "$.properties.global",
        "$.definitions.k8s.io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1",
    ]


def test_embedded_kubernetes_definitions_are_current() -> None:
    res = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen-values-k8s-defs.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr


def test_every_default_value_is_documented() -> None:
    """Each value in values.yaml has a comment right above it, or above a block that holds it."""
    lines = (CHART / "values.yaml").read_text().splitlines()
    stack: list[tuple[int, bool]] = []  # (indent, documented) of the enclosing keys
    undocumented = []
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or ":" not in stripped:
            continue
        indent = len(line) - len(line.lstrip(" -"))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        documented = lines[i - 1].strip().startswith("#") or any(d for _, d in stack)
        stack.append((indent, documented))
        is_leaf = stripped.partition(":")[2].strip() != ""
        if is_leaf and not documented:
            undocumented.append(f"line {i + 1}: {stripped}")
    assert undocumented == []


def test_defaults_satisfy_the_schema() -> None:
    import jsonschema

    jsonschema.Draft7Validator(SCHEMA).validate(yaml.safe_load((CHART / "values.yaml").read_text()))
