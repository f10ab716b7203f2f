"""The evidence record is replaced whole or not at all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agentihooks_demo.record import write_record


def test_record_written_whole(tmp_path: Path) -> None:
    path = tmp_path / "SV2-CKP-05" / "result.json"
    write_record(path, {"package": "SV2-CKP-05", "run": {"id": "r1"}})
    assert json.loads(path.read_text())["run"]["id"] == "r1"
    assert [p.name for p in path.parent.iterdir()] == ["result.json"]


def test_a_record_that_cannot_be_written_leaves_the_old_one(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    write_record(path, {"run": {"id": "old"}})
    with pytest.raises(TypeError):
        write_record(path, {"run": {"id": "new"}, "bad": object()})
    assert json.loads(path.read_text())["run"]["id"] == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


NODE = {
    "versions": {"kubelet": "Kubernetes v1.35.4", "containerd": "containerd 1.7", "runc": "runc version 1.1"},
    "images": {"worker": "agentihooks.local/agentihooks-worker:abc", "pause": "agentihooks.local/pause:1"},
}


def _record(node: dict | None, cases: list[dict]) -> dict:  # type: ignore[type-arg]
    from types import SimpleNamespace

    from agentihooks_demo.harness import fake_harness_bin
    from agentihooks_demo.record import build_record
    from agentihooks_demo.stack import KubeApi

    kube = KubeApi("https://127.0.0.1:1", Path("k"), "ns", plane=object(), versions={})  # type: ignore[arg-type]
    stack = SimpleNamespace(kube=kube)
    return build_record(cases, metrics={}, started="t", bin_dir=fake_harness_bin(), stack=stack, node=node)  # type: ignore[arg-type]


def _case(cid: str, result: str, ran_on: str = "simulated kubelet") -> dict:  # type: ignore[type-arg]
    skip = {"skip_reason": "no node"} if result == "skipped" else {}
    return {"id": cid, "result": result, "ran_on": ran_on, **skip}


def test_a_record_with_the_real_node_names_it_and_what_is_still_simulated() -> None:
    record = _record(
        NODE,
        [
            _case("valid-checkpoint", "pass", "real node"),
            _case("unsupported-harness-version", "pass"),
            _case("conversation-mismatch", "pass"),
        ],
    )
    assert record["evidence_class"] == "live-control-plane-and-real-node"
    assert record["backend"]["node"] == NODE
    assert (
        "Kubernetes v1.35.4" in record["backend"]["kubelet"]
        and "runc version" in record["backend"]["kubelet"]
    )
    assert record["mocked"] is True
    parts = record["mocked_parts"]
    assert any(
        "the kubelet in cases unsupported-harness-version, conversation-mismatch: simulated" in p
        for p in parts
    )
    assert not any("valid-checkpoint" in p for p in parts)
    assert any("real-node cases" in p and "scripted replies" in p for p in parts)
    assert (
        "cases unsupported-harness-version, conversation-mismatch: simulated" in record["backend"]["kubelet"]
    )
    assert record["package_complete"] is True


def test_a_record_whose_cases_all_ran_on_the_real_node_names_only_the_model() -> None:
    record = _record(
        NODE, [_case("valid-checkpoint", "pass", "real node"), _case("real-harness-claude", "pass", "x")]
    )
    assert record["mocked"] is True
    assert len(record["mocked_parts"]) == 1 and "scripted replies" in record["mocked_parts"][0]
    assert not any("fake claude/codex" in line for line in record["remaining_limitations"])


def test_a_record_without_the_real_node_says_why_and_is_not_complete() -> None:
    skipped = {"skipped": "the real node needs root"}
    record = _record(
        skipped, [_case("valid-checkpoint", "pass"), _case("real-node-native-resume", "skipped")]
    )
    assert record["evidence_class"] == "live-control-plane"
    assert record["backend"]["node"] == skipped
    assert any("in every case" in p for p in record["mocked_parts"])
    assert record["status"] == "passed" and record["package_complete"] is False
    assert record["skipped_cases"] == ["real-node-native-resume"]
