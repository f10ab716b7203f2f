"""A checkpoint root is held by a volume that outlives the worker Pod, or the launch is refused."""

from __future__ import annotations

from typing import Any

import pytest
from agentihooks_operator.k8s.building.pods import CHECKPOINT_VOLUME, build_worker_pod
from agentihooks_operator.k8s.building.rootvolume import probe_refusal, root_refusal
from agentihooks_operator.swarm import SwarmSpec
from pydantic import ValidationError
from testsupport.podsecurity import EX, OWNER


def spec(store: dict[str, Any], template: dict[str, Any] | None = None) -> SwarmSpec:
    doc: dict[str, Any] = {
        "image": "registry.example/worker:1",
        "harness": {"name": "claude", "command": ["claude"]},
        "seats": [{"name": "eng-1", "project": "github.com/acme/app", "task": {"id": "t-1", "text": "x"}}],
        "checkpointStore": store,
    }
    if template is not None:
        doc["podTemplate"] = template
    return SwarmSpec.model_validate(doc)


def refusal(s: SwarmSpec) -> str | None:
    pod, _ = build_worker_pod(s, OWNER, EX)
    return root_refusal(s, pod)


def mounting(volume: dict[str, Any], path: str, **mount: Any) -> dict[str, Any]:
    return {
        "spec": {
            "volumes": [{"name": "mine", **volume}],
            "container": {"volumeMounts": [{"name": "mine", "mountPath": path, **mount}]},
        }
    }


def test_a_named_claim_is_mounted_read_write_at_the_root() -> None:
    s = spec({"root": "/checkpoints", "claim": "swarm-ckpt"})
    pod, _ = build_worker_pod(s, OWNER, EX)
    [c] = pod["spec"]["containers"]
    assert {"name": CHECKPOINT_VOLUME, "mountPath": "/checkpoints"} in c["volumeMounts"]
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes[CHECKPOINT_VOLUME] == {
        "name": CHECKPOINT_VOLUME,
        "persistentVolumeClaim": {"claimName": "swarm-ckpt"},
    }
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["AGENTIHOOKS_CHECKPOINT_ROOT"] == "/checkpoints"
    assert root_refusal(s, pod) is None
    assert probe_refusal(s, "team-a", "example") is None


def test_a_root_backed_by_no_volume_is_refused_naming_the_fix() -> None:
    said = refusal(spec({"root": "/checkpoints"}))
    assert said is not None
    assert said.startswith("checkpointStore.root /checkpoints is backed by no volume on the worker Pods")
    assert "checkpointStore.claim" in said and "checkpointStore.remote" in said
    assert probe_refusal(spec({"root": "/checkpoints"}), "team-a", "example") == said


def test_a_root_inside_the_workers_emptydir_home_is_refused() -> None:
    said = refusal(spec({"root": "/home/worker/checkpoints"}))
    assert said is not None and "is on the emptyDir volume home, which dies with the Pod" in said


@pytest.mark.parametrize(
    ("volume", "path", "mount", "expected"),
    [
        ({"persistentVolumeClaim": {"claimName": "c"}}, "/data", {}, None),  # a parent of the root
        ({"persistentVolumeClaim": {"claimName": "c"}}, "/data/ckpt", {}, None),
        ({"persistentVolumeClaim": {"claimName": "c"}}, "/data/ckpt/", {}, None),
        ({"persistentVolumeClaim": {"claimName": "c"}}, "/data/ckp", {}, "backed by no volume"),  # a sibling
        ({"emptyDir": {}}, "/data/ckpt", {}, "is on the emptyDir volume mine"),
        (
            {"ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}},
            "/data",
            {},
            "is on the ephemeral volume mine",
        ),
        ({"configMap": {"name": "x"}}, "/data", {}, "is on a configMap volume"),
        ({"persistentVolumeClaim": {"claimName": "c"}}, "/data", {"readOnly": True}, "is mounted read-only"),
    ],
)
def test_a_template_mount_holds_the_root_only_when_it_lasts_and_is_writable(
    volume: dict[str, Any], path: str, mount: dict[str, Any], expected: str | None
) -> None:
    said = refusal(spec({"root": "/data/ckpt"}, mounting(volume, path, **mount)))
    if expected is None:
        assert said is None
    else:
        assert said is not None and expected in said


def test_an_inner_emptydir_over_a_claim_is_refused() -> None:
    template = {
        "spec": {
            "volumes": [
                {"name": "pvc", "persistentVolumeClaim": {"claimName": "c"}},
                {"name": "e", "emptyDir": {}},
            ],
            "container": {
                "volumeMounts": [
                    {"name": "pvc", "mountPath": "/data"},
                    {"name": "e", "mountPath": "/data/ckpt"},
                ],
            },
        }
    }
    said = refusal(spec({"root": "/data/ckpt"}, template))
    assert said is not None and "emptyDir volume e" in said


@pytest.mark.parametrize("store", [{}, {"remote": True}, {"root": "/checkpoints", "remote": True}])
def test_no_root_of_its_own_needs_no_volume(store: dict[str, Any]) -> None:
    assert refusal(spec(store)) is None


def test_a_claim_without_a_root_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"checkpointStore\.claim needs checkpointStore\.root"):
        spec({"claim": "c"})
    with pytest.raises(ValidationError):
        spec({"root": "/c", "claim": "Not_A_Name"})
