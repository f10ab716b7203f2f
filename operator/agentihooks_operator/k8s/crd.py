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

import re
from typing import Any

from ..swarm import SCHEMA_MARK, SwarmSpec
from .building.podtemplate import MARK as POD_TEMPLATE
from .building.podtemplate import template_schema

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
    # cert-manager's shape: Ready at a glance, its reason and message under ``-o wide``.
    {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
    {
        "name": "Reason",
        "type": "string",
        "priority": 1,
        "jsonPath": '.status.conditions[?(@.type=="Ready")].reason',
    },
    {
        "name": "Status",
        "type": "string",
        "priority": 1,
        "jsonPath": '.status.conditions[?(@.type=="Ready")].message',
    },
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]

STATUS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "What the operator last observed, written by the lease holder after each recovery pass.",
    "properties": {
        "seats": {"type": "integer", "description": "Seats of the Swarm."},
        "running": {"type": "integer", "description": "Seats whose current attempt runs."},
        "recovering": {"type": "integer", "description": "Seats being recovered (fenced, being replaced)."},
        "awaitingDecision": {
            "type": "integer",
            "description": "Seats whose failed attempt waits for a restore decision.",
        },
        "held": {"type": "integer", "description": "Seats whose recovery is held on a step that failed."},
        "paused": {"type": "boolean", "description": "Automation is paused for the Swarm."},
        "controllerEpoch": {
            "type": "integer",
            "description": "Epoch of the Swarm's Redis lease (the fencing token) of the writing operator.",
        },
        "foreignPods": {
            "type": "integer",
            "description": "Pods carrying the Swarm's label but another `controller-owner` value: "
            "counted and reported, never fenced, deleted or replaced.",
        },
        "observedGeneration": {
            "type": "integer",
            "description": "The `metadata.generation` this status was computed for.",
        },
        "handoffs": {
            "type": "array",
            "description": "One card per recent handoff: the outcome a replacement reported (continuity, "
            "checkpoint) as the ledger page shows it.",
            "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
        "conditions": {
            "type": "array",
            "description": "Standard conditions, one per type: `Ready` (the Swarm is looked after: its spec "
            "is valid, Redis answers, no launch is blocked, RBAC allows the calls and a replica holds its "
            "lease), `Stalled` (True while the spec is invalid), `SpecValid` and `CheckpointVolume`.",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
            "items": {
                "type": "object",
                "required": ["type", "status"],
                "properties": {
                    "type": {"type": "string", "description": "Condition type."},
                    "status": {
                        "type": "string",
                        "enum": ["True", "False", "Unknown"],
                        "description": "`True`, `False` or `Unknown`.",
                    },
                    "reason": {"type": "string", "description": "One-word reason in CamelCase."},
                    "message": {"type": "string", "description": "Human-readable details."},
                    "lastTransitionTime": {
                        "type": "string",
                        "description": "When the condition last changed status (RFC 3339).",
                    },
                    "observedGeneration": {
                        "type": "integer",
                        "description": "The `metadata.generation` the condition was computed for.",
                    },
                },
            },
        },
    },
    # kopf keeps its own bookkeeping under status; let it through.
    "x-kubernetes-preserve-unknown-fields": True,
}


#: The ``controller-owner`` label value ``agentihooks-swarm-<name>`` must fit a label value (63).
MAX_NAME = 45
NAME_RULE: dict[str, str] = {
    "rule": f"self.metadata.name.size() <= {MAX_NAME}",
    "message": f"a Swarm name is at most {MAX_NAME} characters: its Pods are labelled "
    "controller-owner=agentihooks-swarm-<name>, and a label value holds 63",
}


def description(text: str) -> str:
    """A model docstring as a CRD description (what ``kubectl explain`` prints): lines joined,
    paragraphs kept, reStructuredText markup reduced to plain backticks."""
    text = re.sub(r":\w+:`~?\.?([^`]+)`", lambda m: f"`{m[1].rsplit('.', 1)[-1]}`", text)
    text = text.replace("``", "`")
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text.strip())]
    return "\n\n".join(p for p in paragraphs if p)


def _structural(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_structural(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if node.get(SCHEMA_MARK) == POD_TEMPLATE:
        # Not derived from the model: the Kubernetes shapes of the Pod template, with their CEL rules.
        schema = template_schema()
        if node.get("description"):
            schema["description"] = description(node["description"])
        return schema
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
        if key == "description":
            out["description"] = description(value)
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
                            "description": "A Swarm: agent seats whose worker Pods the operator "
                            "launches and recovers.",
                            "properties": {
                                "apiVersion": {
                                    "type": "string",
                                    "description": "`agentihooks.io/v1alpha1`.",
                                },
                                "kind": {"type": "string", "description": "`Swarm`."},
                                # The API server refuses anything but `type` here (even a description).
                                "metadata": {"type": "object"},
                                "spec": spec_schema(),
                                "status": STATUS_SCHEMA,
                            },
                            "x-kubernetes-validations": [NAME_RULE],
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
