"""The ``swarms.agentihooks.io`` CustomResourceDefinition, generated from :class:`SwarmSpec`.

The pydantic model is the single source of truth for the Swarm spec: this
module converts its JSON schema into a structural OpenAPI v3 schema (inline
references, ``nullable`` instead of ``anyOf: [.., null]``, OpenAPI 3.0
``exclusiveMinimum``, no ``additionalProperties`` beside ``properties``), so
the CRD, the Helm chart (which renders :func:`crd_manifest`) and the operator's
validation cannot drift apart. ``python -m agentihooks_operator.k8s.crd``
prints the manifest as YAML. ``spec.podTemplate`` is the exception to "derived from the model": its
schema is the real Kubernetes one (:func:`.podtemplate.template_schema`).
"""

from __future__ import annotations

from typing import Any

from ..swarm import SCHEMA_MARK, SwarmSpec
from .podtemplate import MARK as POD_TEMPLATE
from .podtemplate import template_schema

GROUP = "agentihooks.io"
VERSION = "v1alpha1"
PLURAL = "swarms"
KIND = "Swarm"
API_VERSION = f"{GROUP}/{VERSION}"

_DROP = {"title", "additionalProperties", "$defs", "discriminator"}

PRINTER_COLUMNS: list[dict[str, Any]] = [
    {"name": "Seats", "type": "integer", "jsonPath": ".status.seats"},
    {"name": "Running", "type": "integer", "jsonPath": ".status.running"},
    {"name": "Recovering", "type": "integer", "jsonPath": ".status.recovering"},
    {"name": "Awaiting Decision", "type": "integer", "jsonPath": ".status.awaitingDecision"},
    {"name": "Paused", "type": "boolean", "jsonPath": ".status.paused"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]

STATUS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "seats": {"type": "integer"},
        "running": {"type": "integer"},
        "recovering": {"type": "integer"},
        "awaitingDecision": {"type": "integer"},
        "held": {"type": "integer"},
        "paused": {"type": "boolean"},
        "controllerEpoch": {"type": "integer"},
        "observedGeneration": {"type": "integer"},
        "handoffs": {
            "type": "array",
            "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
        "conditions": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["type", "status"],
                "properties": {
                    "type": {"type": "string"},
                    "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                    "reason": {"type": "string"},
                    "message": {"type": "string"},
                    "lastTransitionTime": {"type": "string"},
                },
            },
        },
    },
    # kopf keeps its own bookkeeping under status; let it through.
    "x-kubernetes-preserve-unknown-fields": True,
}


def _structural(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_structural(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if node.get(SCHEMA_MARK) == POD_TEMPLATE:
        # Not derived from the model: the Kubernetes shapes of the Pod template, with their CEL rules.
        return template_schema()
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _structural(merged, defs)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROP or (key == "default" and value is None):
            continue
        if key == "anyOf":
            kinds = [v for v in value if v.get("type") != "null"]
            if len(kinds) == 1 and len(kinds) < len(value):
                out.update(_structural(kinds[0], defs))
                out["nullable"] = True
                continue
        if key == "exclusiveMinimum" and not isinstance(value, bool):
            out["minimum"] = value
            out["exclusiveMinimum"] = True
            continue
        if key == "const":
            out["enum"] = [value]
            continue
        out[key] = _structural(value, defs)
    return out


def spec_schema() -> dict[str, Any]:
    """The Swarm ``spec`` as a structural OpenAPI v3 schema."""
    raw = SwarmSpec.model_json_schema(by_alias=True, mode="validation")
    schema: dict[str, Any] = _structural(raw, raw.get("$defs", {}))
    return schema


def crd_manifest() -> dict[str, Any]:
    """The full CustomResourceDefinition object."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": PLURAL, "singular": "swarm", "kind": KIND, "shortNames": ["sw"]},
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": PRINTER_COLUMNS,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec_schema(),
                                "status": STATUS_SCHEMA,
                            },
                        }
                    },
                }
            ],
        },
    }


if __name__ == "__main__":  # pragma: no cover - a convenience for the chart
    import sys

    import yaml

    sys.stdout.write(yaml.safe_dump(crd_manifest(), sort_keys=False))
