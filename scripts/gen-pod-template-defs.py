#!/usr/bin/env python3
"""Vendor the Kubernetes shapes of the Swarm's worker Pod template into the operator package.

``spec.podTemplate`` of a Swarm takes a chosen subset of the real ``PodSpec`` and ``Container`` fields.
Rather than leaving them open, the CRD validates each against the real Kubernetes 1.30 OpenAPI
definitions bundled with the ``kubernetes-validate`` package (a test dependency; the operator itself
only reads the file this script writes). Each definition is inlined and made structural, as a CRD
needs it: each description cut to its first sentence (``kubectl explain`` prints it; the whole texts
would triple the CRD's size), ``$ref`` inlined, ``[type, "null"]`` reduced to the type (the API
server prunes nulls), quantities and int-or-strings marked ``x-kubernetes-int-or-string``, list and
map markers dropped (the Pod's own validation checks them when the Pod is created). Unknown fields
stay unknown: ``kubectl`` (strict field validation) refuses them with their path.

``scripts/gen-pod-template-defs.py --check`` exits 1 when the file is out of date (tests/unit/k8s
runs it); ``scripts/gen-crd.py`` then renders the CRD from it.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate

sys.path.insert(0, str(Path(__file__).resolve().parent))  # generated_file sits beside this script
from generated_file import arguments, write_or_check

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "operator" / "agentihooks_operator" / "k8s" / "building" / "worker_pod_fields.json"
K8S_VERSION = "1.30.0"
sys.path.insert(0, str(ROOT / "operator"))
from agentihooks_operator.worker_pod import CONTAINER_FIELDS, POD_FIELDS  # noqa: E402

INT_OR_STRING = (
    "io.k8s.apimachinery.pkg.api.resource.Quantity",
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
)
KEEP_FORMATS = {"int32", "int64", "double", "byte"}
SCHEMA_KEYS = {"type", "properties", "items", "additionalProperties", "required", "enum", "format", "$ref"}
#: A description is cut to its first sentence, at most this long (the CRD stays small).
DESCRIPTION_CAP = 200


def first_sentence(text: str) -> str:
    """The first sentence of a Kubernetes description, on one line (abbreviations like e.g. kept)."""
    flat = " ".join(text.split())
    match = re.search(r"(?<!\be\.g)(?<!\bi\.e)(?<!\betc)(?<!\bvs)\.(\s|$)", flat)
    sentence = flat[: match.start() + 1] if match else flat
    if len(sentence) > DESCRIPTION_CAP:
        sentence = sentence[: DESCRIPTION_CAP - 1].rsplit(" ", 1)[0] + "…"
    return sentence


def _defs() -> dict[str, Any]:
    base = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    path = base / f"v{K8S_VERSION}-local-strict" / "_definitions.json"
    defs: dict[str, Any] = json.loads(path.read_text())["$defs"]
    return defs


def _int_or_string(node: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"x-kubernetes-int-or-string": True}
    if node.get("description"):
        out["description"] = first_sentence(node["description"])
    return out


def _structural(node: dict[str, Any], defs: dict[str, Any], trail: tuple[str, ...] = ()) -> dict[str, Any]:
    """One schema node, inlined and structural."""
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        if name in INT_OR_STRING:
            return _int_or_string(node)
        if name in trail:
            raise ValueError(f"recursive definition {name}: cannot inline it")
        inlined = _structural(defs[name], defs, (*trail, name))
        if node.get("description"):  # the field's own description says more than its type's
            inlined["description"] = first_sentence(node["description"])
        return inlined
    if "oneOf" in node:  # only the two int-or-string shapes use it
        return _int_or_string(node)
    out: dict[str, Any] = {}
    kind = node.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    if kind is not None:
        out["type"] = kind
    for key, value in node.items():
        if key == "description" and value:
            out["description"] = first_sentence(value)
            continue
        if key not in SCHEMA_KEYS or key in {"type", "$ref"}:
            continue
        if key == "properties":
            out["properties"] = {k: _structural(v, defs, trail) for k, v in sorted(value.items())}
        elif key == "items":
            out["items"] = _structural(value, defs, trail)
        elif key == "additionalProperties":
            if isinstance(value, dict):  # a map; ``false`` (closed object) is the CRD's default anyway
                out["additionalProperties"] = _structural(value, defs, trail)
        elif key == "format":
            if value in KEEP_FORMATS:
                out["format"] = value
        elif key == "enum":
            out["enum"] = [v for v in value if v is not None]
        else:
            out[key] = value
    return out


def definitions() -> dict[str, Any]:
    defs = _defs()
    pod = defs["io.k8s.api.core.v1.PodSpec"]["properties"]
    container = defs["io.k8s.api.core.v1.Container"]["properties"]
    return {
        "kubernetesVersion": K8S_VERSION,
        "pod": {name: _structural(pod[name], defs) for name in POD_FIELDS},
        "container": {name: _structural(container[name], defs) for name in CONTAINER_FIELDS},
    }


def render() -> str:
    return json.dumps(definitions(), indent=1, sort_keys=True) + "\n"


def main() -> int:
    args = arguments(__doc__, "vendored definitions", TARGET)
    return write_or_check(args.target, render(), check=args.check, script="gen-pod-template-defs.py")


if __name__ == "__main__":
    raise SystemExit(main())
