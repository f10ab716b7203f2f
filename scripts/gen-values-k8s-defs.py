#!/usr/bin/env python3
"""Embed the Kubernetes object schemas the chart's values pass through into values.schema.json.

Values such as ``operator.affinity`` or ``operator.tolerations`` are handed to Kubernetes as they are.
Rather than leaving them open, values.schema.json validates them against the real (strict, closed)
Kubernetes 1.30 schemas bundled with the ``kubernetes-validate`` package: a typo inside an affinity
fails ``helm install`` too. This script copies the needed definitions, descriptions dropped, under
``definitions``; ``--check`` exits 1 when the file is out of date (tests/unit/chart runs it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate

sys.path.insert(0, str(Path(__file__).resolve().parent))  # generated_file sits beside this script
from generated_file import arguments, write_or_check

SCHEMA_FILE = Path(__file__).resolve().parents[1] / "charts" / "agentihooks-recovery" / "values.schema.json"
K8S_VERSION = "1.30.0"
ROOTS = {
    "Affinity": "io.k8s.api.core.v1.Affinity",
    "Toleration": "io.k8s.api.core.v1.Toleration",
    "EnvVar": "io.k8s.api.core.v1.EnvVar",
    "TopologySpreadConstraint": "io.k8s.api.core.v1.TopologySpreadConstraint",
    "NetworkPolicyPeer": "io.k8s.api.networking.v1.NetworkPolicyPeer",
    "PodSecurityContext": "io.k8s.api.core.v1.PodSecurityContext",
    "SecurityContext": "io.k8s.api.core.v1.SecurityContext",
    "DeploymentStrategy": "io.k8s.api.apps.v1.DeploymentStrategy",
    "Volume": "io.k8s.api.core.v1.Volume",
    "VolumeMount": "io.k8s.api.core.v1.VolumeMount",
}
PREFIX = "k8s."


def _k8s_defs() -> dict[str, Any]:
    base = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    path = base / f"v{K8S_VERSION}-local-strict" / "_definitions.json"
    defs: dict[str, Any] = json.loads(path.read_text())["$defs"]
    return defs


def _rewrite(node: Any, needed: set[str]) -> Any:
    if isinstance(node, list):
        return [_rewrite(v, needed) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in {"description", "x-kubernetes-patch-merge-key", "x-kubernetes-patch-strategy"}:
            continue
        if key == "$ref":
            name = value.rsplit("/", 1)[-1]
            needed.add(name)
            out[key] = f"#/definitions/{PREFIX}{name}"
            continue
        out[key] = _rewrite(value, needed)
    return out


def definitions() -> dict[str, Any]:
    source = _k8s_defs()
    todo, done, out = set(ROOTS.values()), set(), {}
    while todo:
        name = todo.pop()
        done.add(name)
        needed: set[str] = set()
        out[PREFIX + name] = _rewrite(source[name], needed)
        todo |= needed - done
    return dict(sorted(out.items()))


def render(schema: dict[str, Any]) -> str:
    updated = {**schema, "definitions": definitions()}
    return json.dumps(updated, indent=2) + "\n"


def main() -> int:
    args = arguments(__doc__, "values.schema.json", None)
    text = render(json.loads(SCHEMA_FILE.read_text(encoding="utf-8")))
    return write_or_check(SCHEMA_FILE, text, check=args.check, script="gen-values-k8s-defs.py")


if __name__ == "__main__":
    raise SystemExit(main())
