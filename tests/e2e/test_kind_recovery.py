"""Real failures in a kind cluster, each ending with exactly one replacement and a reported continuity.

Runs deploy/kind/check.sh for each scenario (see conftest.py for when these run at all).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

SCENARIOS = {
    "oom": "oom_killed",
    "evict": "evicted",
    "node-loss": "node_lost",
    "bad-image": "image_pull",
}


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_failure_ends_with_one_replacement(kind_cluster: Path, scenario: str) -> None:
    proc = subprocess.run(
        [str(kind_cluster / "check.sh"), scenario], capture_output=True, text=True, timeout=1700
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, f"check.sh printed no result: {proc.stderr[-2000:]}"
    result = json.loads(lines[-1])
    assert proc.returncode == 0 and result["ok"], result.get("error", proc.stderr[-2000:])
    assert result["reason"] == SCENARIOS[scenario]
    assert result["replacements"] == 1
    assert result["continuity"] in {"native", "reconstructed", "fresh"}
