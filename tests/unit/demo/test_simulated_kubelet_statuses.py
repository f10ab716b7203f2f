"""The simulated kubelet writes what the operator's classifier reads as each failure.

Pure: the demo's status builders go straight into the operator's classifier
and observation code, so a drift in either shows up here without a server.
"""

from __future__ import annotations

from typing import Any

from agentihooks_demo import podstatus
from agentihooks_operator.k8s.observing.classify import apply_pull_grace, classify
from agentihooks_operator.k8s.observing.observe import SUPERSEDED, _superseded

IMAGE = "ghcr.io/agentihooks/worker:2.1.0"


def pod(status: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "swarm-exe-1", "namespace": "default", "annotations": annotations or {}}
    spec = {"nodeName": podstatus.NODE, "containers": [{"name": "agent", "image": IMAGE}]}
    return {"metadata": meta, "spec": spec, "status": status}


def test_running_worker_is_running() -> None:
    assert classify(pod(podstatus.running(IMAGE, podstatus.ts()))).state == "running"


def test_oom_kill_is_oom_killed() -> None:
    verdict = classify(pod(podstatus.terminated(IMAGE, 137, podstatus.ts(), oom=True)))
    assert (verdict.state, verdict.reason) == ("failed", "oom_killed")


def test_worker_exit_codes() -> None:
    assert classify(pod(podstatus.terminated(IMAGE, 0, podstatus.ts()))).state == "succeeded"
    refused = classify(pod(podstatus.terminated(IMAGE, 64, podstatus.ts())))
    assert (refused.state, refused.reason) == ("failed", "application_exit")
    assert classify(pod(podstatus.never_started(IMAGE, 64))).reason == "application_exit"


def test_pull_failure_counts_only_after_its_grace() -> None:
    verdict = classify(pod(podstatus.pull_failure(IMAGE)))
    assert verdict.pull_failure and verdict.state != "failed"
    early = apply_pull_grace(verdict, first_seen_ms=1_000, now_ms=2_999, grace_ms=2_000)
    assert early.state != "failed"
    late = apply_pull_grace(verdict, first_seen_ms=1_000, now_ms=3_000, grace_ms=2_000)
    assert (late.state, late.reason) == ("failed", "image_pull")


def test_superseded_annotation_marks_a_legacy_spawn() -> None:
    key, value = SUPERSEDED
    assert _superseded(pod(podstatus.never_started(IMAGE, 64), {key: value}))
    assert not _superseded(pod(podstatus.never_started(IMAGE, 64), {key: "something-else"}))
    assert not _superseded(pod(podstatus.never_started(IMAGE, 64)))
    assert not _superseded(None)
