"""The seeded short fault campaign of the test tier (issue 26): replicas, Redis under Sentinel and the
API server hurt at random, seats failing, a master deciding; the checker must find nothing.

The seed is fixed so a failure replays (``AGENTIHOOKS_CHAOS_SEED`` picks another, and
``AGENTIHOOKS_CHAOS_MINUTES`` the length); a failure prints the seed, the summary and each violated
invariant with the seat, the attempt and the two conflicting entries. The 30-minute campaigns of
docs/reliability.md run the same code from the command line.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from testsupport.chaos.campaign import Settings, run_campaign, summary

SEED = int(os.environ.get("AGENTIHOOKS_CHAOS_SEED", "3"))
MINUTES = float(os.environ.get("AGENTIHOOKS_CHAOS_MINUTES", "3"))

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(int(MINUTES * 60) + 600),
    # Part of `make test`; AGENTIHOOKS_CHAOS=0 leaves it out of a quick local run (never under CI).
    pytest.mark.skipif(
        os.environ.get("AGENTIHOOKS_CHAOS") == "0" and not os.environ.get("CI"),
        reason="the fault campaign was left out (AGENTIHOOKS_CHAOS=0)",
    ),
]


async def test_a_seeded_campaign_breaks_no_invariant(
    control_plane: object, session_helm: object, tmp_path: Path
) -> None:
    report = await run_campaign(Settings(SEED, MINUTES * 60), control_plane, session_helm, tmp_path)
    print(f"campaign seed {SEED}, {MINUTES} min\n{summary(report)}")
    told = f"seed {SEED} (replay: AGENTIHOOKS_CHAOS_SEED={SEED}):\n{summary(report)}"
    assert not report.errors, f"the campaign itself failed, {told}"
    assert not report.violations, f"invariants broken, {told}"
    # a campaign that hurt nothing or failed no seat proves nothing: it must really have run
    assert sum(report.faults.values()) >= 5, f"too few faults injected, {told}"
    assert sum(report.failures.values()) >= 10, f"too few seat failures, {told}"
    assert report.decisions, f"the master decided nothing, {told}"
