"""Pod failure classification as the original does it (COMPAT.md, "Pods": classification precedence).

Each test names its rule (``CLASSIFY-<n>``, listed in docs/compatibility.md). Pods are written
by hand as the original's controller creates them (``testsupport.original_records.original_pod``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from agentihooks_operator.k8s.observing.classify import apply_pull_grace, classify
from testsupport.original_records import EXECUTION, original_pod

NOW = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


def pod(phase: str = "Running", state: dict[str, Any] | None = None, **status: Any) -> dict[str, Any]:
    p = original_pod(EXECUTION, "swarm-a", phase=phase, container_state=state)
    p["status"].update(status)
    return p


@pytest.mark.parametrize(
    "terminated",
    [{}, {"reason": "Error"}, {"exitCode": None, "reason": "Unknown"}, {"exitCode": "0"}],
    ids=["CLASSIFY-1-empty", "CLASSIFY-1-no-exit-code", "CLASSIFY-1-null-exit-code", "CLASSIFY-1-text-code"],
)
@pytest.mark.parametrize("phase", ["Running", "Succeeded"])
def test_classify_1_a_terminated_container_without_exit_code_is_an_exit(
    terminated: dict[str, Any], phase: str
) -> None:
    """CLASSIFY-1: a terminated container whose exitCode is missing counts as an exit, not as success."""
    verdict = classify(pod(phase, {"terminated": terminated}), now=NOW)
    assert (verdict.state, verdict.reason) == ("failed", "application_exit")


def test_classify_2_only_an_explicit_zero_exit_code_is_success() -> None:
    """CLASSIFY-2: exitCode 0 with phase Succeeded is success; a non-zero code is application_exit."""
    assert classify(
        pod("Succeeded", {"terminated": {"exitCode": 0, "reason": "Completed"}}), now=NOW
    ).state == ("succeeded")
    failed = classify(pod("Running", {"terminated": {"exitCode": 3, "reason": "Error"}}), now=NOW)
    assert (failed.state, failed.reason) == ("failed", "application_exit")


def test_classify_3_precedence_oom_before_eviction_before_node_lost_before_image_pull_before_exit() -> None:
    """CLASSIFY-3: oom_killed > evicted > node_lost > image_pull > application_exit."""
    oom = {"terminated": {"reason": "OOMKilled"}}
    assert classify(pod("Failed", oom, reason="Evicted"), now=NOW).reason == "oom_killed"
    assert classify(pod("Failed", {"terminated": {}}, reason="Evicted"), now=NOW).reason == "evicted"
    assert classify(pod("Failed", {"terminated": {}}, reason="NodeLost"), now=NOW).reason == "node_lost"
    waiting = pod("Pending", {"waiting": {"reason": "ImagePullBackOff"}})
    held = apply_pull_grace(classify(waiting, now=NOW), first_seen_ms=0, now_ms=120_000, grace_ms=120_000)
    assert held.reason == "image_pull"
    early = apply_pull_grace(classify(waiting, now=NOW), first_seen_ms=1, now_ms=120_000, grace_ms=120_000)
    assert early.state == "pending"
