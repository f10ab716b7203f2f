"""A launch whose answer was lost, on real Redis and a real checkpoint store: when its Pod was created
and then deleted before any pass confirmed it, the attempt is never launched a second time (it is
fenced for its missing Pod and replaced once); when the create never took effect, it is sent again,
once. Found by the fault campaign (docs/reliability.md): the same attempt's Pod created twice."""

from __future__ import annotations

import json
from typing import Literal

from agentihooks_operator.recovery import AttemptObservation, LaunchPlan
from testsupport.recovery import MemoryLauncher, observe, swarm_spec


class LossyLauncher(MemoryLauncher):
    """Loses the answer of chosen launches: after the create took effect (``taken``) or before it
    reached the server (``dropped``); an admin may delete a Pod, which the watch would have seen."""

    def __init__(self) -> None:
        super().__init__()
        self.lose: Literal["taken", "dropped"] | None = None
        self.gone: set[str] = set()

    def launch(self, plan: LaunchPlan) -> Literal["created", "exists"]:
        lose, self.lose = self.lose, None
        if lose == "dropped":
            raise ConnectionError("the connection broke before the create was sent")
        answer = super().launch(plan)
        if lose == "taken":
            raise ConnectionError("the connection broke before the create's answer came")
        return answer

    def admin_delete(self, execution_id: str) -> None:
        with self._lock:
            self.pods.pop(execution_id, None)
            self.gone.add(execution_id)

    def deleted(self, execution_id: str) -> bool:
        return execution_id in self.gone


def _replace(r, client, spec, checkpoint, launcher: LossyLauncher, lose: str) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """Seat eng-1's first attempt OOM-killed with a native checkpoint: the automated decision
    resumes it; the replacement's launch loses its answer as ``lose`` says."""
    first = r.ensure_seats(spec)[0].execution_id
    launcher.lose = lose  # type: ignore[assignment]
    r.report_session(first, "sess-1")
    checkpoint(first, session_id="sess-1")
    r.reconcile(spec, observe([(first, "eng-1", 1)], failed={first: "oom_killed"}))
    replacement = client.hget(r.keys.seats, "eng-1").decode()
    assert replacement != first
    return first, replacement


def _launch_status(client, r, eid: str) -> str:  # type: ignore[no-untyped-def]
    return str(json.loads(client.hget(r.keys.attempt_journal, eid))["launch"]["status"])


def test_a_pod_created_then_deleted_before_its_launch_was_confirmed_is_never_created_again(  # type: ignore[no-untyped-def]
    make, client, checkpoint
) -> None:
    launcher = LossyLauncher()
    r = make(launcher=launcher)
    spec = swarm_spec(1)
    first, replacement = _replace(r, client, spec, checkpoint, launcher, "taken")
    assert launcher.created[replacement] == 1
    assert _launch_status(client, r, replacement) == "unknown"  # the answer was lost

    launcher.admin_delete(replacement)  # before any pass looked again
    r.reconcile(spec, [])  # the resumed launch: absent, but seen created and deleted
    assert launcher.created[replacement] == 1, "the attempt's Pod was created a second time"
    assert _launch_status(client, r, replacement) == "ok"

    # Its Pod is missing now: fenced like any lost Pod (it never reported a session, so the seat waits
    # for a decision), and replaced once when one comes.
    gone = AttemptObservation(execution_id=replacement, seat="eng-1", generation=2, state="gone")
    report = r.reconcile(spec, [gone])
    assert report.fenced == [replacement]
    assert launcher.created[replacement] == 1
    d = r.decide(replacement, "fresh", "master@example-1", spec=spec)
    third = d.replacement
    assert third is not None and third not in (first, replacement)
    r.reconcile(spec, [])
    assert launcher.created == {first: 1, replacement: 1, third: 1}


def test_a_create_that_never_took_effect_is_sent_again_once(make, client, checkpoint) -> None:  # type: ignore[no-untyped-def]
    launcher = LossyLauncher()
    r = make(launcher=launcher)
    spec = swarm_spec(1)
    _, replacement = _replace(r, client, spec, checkpoint, launcher, "dropped")
    assert launcher.created[replacement] == 0
    assert _launch_status(client, r, replacement) == "unknown"
    r.reconcile(spec, [])  # absent and never seen: sent again
    assert launcher.created[replacement] == 1 and replacement in launcher.pods
    assert _launch_status(client, r, replacement) == "ok"
    r.reconcile(spec, [])
    assert launcher.created[replacement] == 1
