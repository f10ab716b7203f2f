"""The seeded short fault campaign of the test tier (issue 26): replicas, Redis under Sentinel and the
API server hurt at random, seats failing, a master deciding, workers and a node cut off from the
controllers; the checker must find nothing, and must find the overlap planted in that same history.

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
from testsupport.chaos.checker import check
from testsupport.chaos.history import Entry, Pod, Request, read

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
    # the agents spoke, and their workers were cut off: the one-live-agent rule was put to the test
    assert report.speakers >= 6 and report.requests >= 100, f"the seats' agents hardly spoke, {told}"
    assert report.faults["worker_cut"] + report.faults["node_cut"] >= 2, f"no worker-side partition, {told}"
    # and the checker would have seen an overlap in this very history
    planted = plant_overlap(read(report.history))
    assert planted is not None, f"no seat was replaced after its agent spoke, {told}"
    bound = Settings(SEED, 0).liveness_bound_s * 0.9  # as the campaign's own check
    assert [v.invariant for v in check(planted, liveness_bound_s=bound)] == ["two_live_agents"]


def plant_overlap(entries: list[Entry]) -> list[Entry] | None:
    """The history with one more request from a replaced attempt, just after its successor's first."""
    created = {e.attempt: e for e in entries if isinstance(e, Pod) and e.verb == "create"}
    first: dict[str, Request] = {}
    for e in entries:
        if isinstance(e, Request):
            first.setdefault(e.attempt, e)
    for old, pod in created.items():
        successor = next(
            (c for c in created.values() if (c.swarm, c.seat) == (pod.swarm, pod.seat)
             and c.generation == pod.generation + 1 and c.attempt in first), None,
        )  # fmt: skip
        if old in first and successor is not None:
            late = Request(t=first[successor.attempt].t + 0.01, kind="request", swarm=pod.swarm, attempt=old)
            return [*entries, late.model_copy(update={"line": len(entries) + 1})]
    return None
