"""The CRD follows SwarmSpec; the Pod, ConfigMap and Secret builders follow the original's names."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
from agentihooks_checkpoint.directive import Continuity, RestoreDirective
from agentihooks_checkpoint.launch import LaunchRecord, RestoreSource
from agentihooks_operator.k8s import crd
from agentihooks_operator.k8s.building.pods import (
    Execution,
    Owner,
    build_launch_record,
    build_pod_spec,
    build_worker_secret,
)
from agentihooks_operator.swarm import SwarmSpec
from pydantic import ValidationError

SPEC: dict[str, Any] = {
    "image": "ghcr.io/agentihooks/worker:2.1.0",
    "harness": {"name": "claude", "command": ["claude", "-p", "go"]},
    "seats": [{"name": "eng-1", "project": "github.com/acme/app", "task": {"id": "t-1", "text": "fix it"}}],
    "masters": [{"agent": "master@example-1", "credentialSecret": "master-1"}],
    "recovery": {"automation": True, "imagePullGraceSeconds": 120, "passIntervalSeconds": 2},
    "checkpointStore": {"root": "/var/lib/checkpoints"},
}
OWNER = Owner(name="example", namespace="team-a", uid="0b5d-uid", controller="op-1")
EX = Execution(
    execution_id="exe-" + "a" * 32,
    generation=2,
    seat="eng-1",
    task_id="t-1",
    task_generation=1,
    grant_id="grant-1",
    controller_epoch=7,
    directive=RestoreDirective(
        checkpoint_id="ckpt-7", recovery=Continuity.NATIVE, session_id="s-1", watermark=412
    ),
    restore_from=RestoreSource(execution_id="exe-" + "b" * 32, execution_generation=1),
)


def _validator() -> jsonschema.Draft4Validator:
    schema = crd.crd_manifest()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return jsonschema.Draft4Validator(schema)


def test_crd_is_a_valid_kubernetes_object() -> None:
    kubernetes_validate.validate(crd.crd_manifest(), "1.35.0", strict=True)


def test_crd_has_status_subresource_and_printer_columns() -> None:
    version = crd.crd_manifest()["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}}
    names = [c["name"] for c in version["additionalPrinterColumns"]]
    assert names[:5] == ["Seats", "Running", "Recovering", "Awaiting Decision", "Paused"]


def test_crd_accepts_what_the_model_accepts() -> None:
    SwarmSpec.model_validate(SPEC)
    _validator().validate(SPEC)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("harness", "name"), "gemini"),
        (("seats",), []),
        (("recovery", "passIntervalSeconds"), 0),
        (("recovery", "imagePullGraceSeconds"), -1),
        (("masters",), [{"agent": "bad agent!", "credentialSecret": "x"}]),
        (("image",), ""),
    ],
)
def test_crd_and_model_refuse_the_same_bad_fields(path: tuple[str, ...], value: Any) -> None:
    bad = json.loads(json.dumps(SPEC))
    target = bad
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(ValidationError):
        SwarmSpec.model_validate(bad)
    assert list(_validator().iter_errors(bad)), f"CRD schema accepted {path}={value!r}"


def _nodes(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, list):
        return [n for v in node for n in _nodes(v)]
    if not isinstance(node, dict):
        return []
    return [node, *(n for v in node.values() for n in _nodes(v))]


def test_schema_has_no_refs_or_anyof() -> None:
    text = json.dumps(crd.spec_schema())
    assert "$ref" not in text and "anyOf" not in text and "oneOf" not in text
    # Structural: additionalProperties only as a map's value schema, never beside properties.
    for node in _nodes(crd.spec_schema()):
        if "additionalProperties" in node and isinstance(node["additionalProperties"], dict | bool):
            assert "properties" not in node and isinstance(node["additionalProperties"], dict)


def test_pod_names_labels_and_annotations() -> None:
    spec = SwarmSpec.model_validate(SPEC)
    pod = build_pod_spec(spec, OWNER, EX)
    meta = pod["metadata"]
    assert meta["name"] == f"swarm-{EX.execution_id}"
    assert meta["namespace"] == "team-a"
    assert meta["labels"] == {
        "swarm.agentihooks.io/controller-owner": "agentihooks-swarm-example",
        "swarm.agentihooks.io/execution-id": EX.execution_id,
        "swarm.agentihooks.io/generation": "2",
        "swarm.agentihooks.io/swarm": "example",
        "swarm.agentihooks.io/task": "t-1",
    }
    assert meta["annotations"] == {
        "swarm.agentihooks.io/operator-id": "op-1",
        "swarm.agentihooks.io/seat": "eng-1",
        "swarm.agentihooks.io/grant-ref": "grant-1",
        "swarm.agentihooks.io/controller-epoch": "7",
        "swarm.agentihooks.io/project": "github.com/acme/app",
        "swarm.agentihooks.io/harness": "claude",
    }
    assert meta["ownerReferences"][0]["uid"] == "0b5d-uid"
    assert pod["spec"]["restartPolicy"] == "Never"
    kubernetes_validate.validate(pod, "1.35.0", strict=True)
    container = pod["spec"]["containers"][0]
    assert container["name"] == "agent"
    assert container["volumeMounts"][0]["mountPath"] == "/var/run/swarm/launch"
    token_env = next(e for e in container["env"] if e["name"] == "AGENTIHOOKS_WORKER_TOKEN")
    assert token_env["valueFrom"]["secretKeyRef"]["name"] == f"swarm-{EX.execution_id}-credential"
    assert "value" not in token_env


def test_launch_record_round_trips_through_the_attempts_secret() -> None:
    """One Secret per attempt carries the launch record beside the token; the Pod mounts only that key
    at the original's path (no ConfigMap is made: a launch is two creates)."""
    spec = SwarmSpec.model_validate(SPEC)
    record = build_launch_record(spec, OWNER, EX, control_url="http://control:8080")
    secret = build_worker_secret("tok-123", OWNER, EX, None, record)
    assert secret["metadata"]["name"] == f"swarm-{EX.execution_id}-credential"
    kubernetes_validate.validate(secret, "1.35.0", strict=True)
    volume = next(v for v in build_pod_spec(spec, OWNER, EX)["spec"]["volumes"] if v["name"] == "launch")
    assert volume["secret"] == {
        "secretName": secret["metadata"]["name"],
        "items": [{"key": "launch.json", "path": "launch.json"}],
    }
    assert secret["stringData"]["token"] == "tok-123"
    parsed = LaunchRecord.model_validate_json(secret["stringData"]["launch.json"])
    assert parsed == record
    assert parsed.authority.generation == 2
    assert parsed.restore == EX.directive
    assert parsed.restore_from == EX.restore_from
    assert parsed.registration is not None
    assert parsed.registration.compatibility_key == "2.1.0"
    assert parsed.harness == "claude"


def test_worker_secret_holds_the_token_only_in_the_secret() -> None:
    spec = SwarmSpec.model_validate(SPEC)
    secret = build_worker_secret("tok-123", OWNER, EX)
    kubernetes_validate.validate(secret, "1.35.0", strict=True)
    assert secret["stringData"] == {"token": "tok-123"}
    assert "tok-123" not in json.dumps(build_pod_spec(spec, OWNER, EX))


def test_unknown_seat_is_refused() -> None:
    spec = SwarmSpec.model_validate(SPEC)
    with pytest.raises(KeyError, match="eng-9"):
        build_pod_spec(spec, OWNER, Execution(**{**EX.__dict__, "seat": "eng-9"}))
