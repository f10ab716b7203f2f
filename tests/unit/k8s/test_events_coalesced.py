"""A burst of notices costs the API server one Swarm Event per kind of step, each Pod still its own."""

from __future__ import annotations

import threading

import pytest
from agentihooks_operator.k8s.events import Notice, coalesced
from testsupport.eventposting import SPEC, BlockedRecovery, FakeKube, runner_for


def notices(reason: str, n: int, *, warning: bool = False) -> list[Notice]:
    return [
        Notice(reason, f"seat s-{i} attempt exe-{i}: oom_killed", execution_id=f"exe-{i}", warning=warning)
        for i in range(n)
    ]


def test_ten_fences_are_one_swarm_event_counting_ten_and_ten_pod_events() -> None:
    events = coalesced(notices("Fenced", 10, warning=True), swarm="eng", namespace="ns", swarm_uid="u-1")
    on_swarm = [e for e in events if e["involvedObject"]["kind"] == "Swarm"]
    on_pods = [e for e in events if e["involvedObject"]["kind"] == "Pod"]
    assert len(on_swarm) == 1 and len(on_pods) == 10
    swarm = on_swarm[0]
    assert swarm["count"] == 10 and swarm["type"] == "Warning" and swarm["involvedObject"]["uid"] == "u-1"
    assert swarm["message"].startswith("10 attempts: seat s-0 attempt exe-0: oom_killed; seat s-1")
    assert [e["involvedObject"]["name"] for e in on_pods] == [f"swarm-exe-{i}" for i in range(10)]
    assert all(e["count"] == 1 and e["message"].startswith("seat s-") for e in on_pods)


def test_a_long_batch_names_what_fits_and_counts_the_rest() -> None:
    events = coalesced(notices("Decided", 100), swarm="eng", namespace="ns", swarm_uid=None)
    message = events[0]["message"]
    assert len(message) <= 1024 and events[0]["count"] == 100
    named = message.count("attempt exe-")
    assert 0 < named < 100 and message.endswith(f" ... and {100 - named} more")


def test_a_lone_notice_is_the_event_it_always_was_and_groups_keep_their_order() -> None:
    batch = [
        Notice("Fenced", "seat a attempt exe-1: oom_killed", execution_id="exe-1", warning=True),
        Notice("Decided", "seat a attempt exe-1: resume", execution_id="exe-1"),
        Notice("Fenced", "seat b attempt exe-2: evicted", execution_id="exe-2", warning=True),
        Notice("RequestRefused", "refused"),
    ]
    events = coalesced(batch, swarm="eng", namespace="ns", swarm_uid=None)
    assert [(e["reason"], e["involvedObject"]["kind"], e["count"]) for e in events] == [
        ("Fenced", "Swarm", 2),
        ("Fenced", "Pod", 1),
        ("Fenced", "Pod", 1),
        ("Decided", "Swarm", 1),
        ("Decided", "Pod", 1),
        ("RequestRefused", "Swarm", 1),
    ]
    assert events[3]["message"] == "seat a attempt exe-1: resume"


def test_notices_queued_while_the_poster_is_busy_go_out_coalesced() -> None:
    kube, recovery = FakeKube(), BlockedRecovery()
    runner = runner_for(kube, recovery)
    runner._post(Notice("RequestRefused", "first"))  # its Event blocks the poster
    assert kube.first_in_flight.wait(10)
    for notice in notices("Fenced", 5, warning=True):
        runner._post(notice)
    kube.finish_first.set()
    recovery.release.set()
    threading.Thread(target=runner.run, args=(SPEC,)).start()
    runner.close()
    assert kube.posted == [("RequestRefused", "Swarm"), ("Fenced", "Swarm")] + [("Fenced", "Pod")] * 5


def test_every_event_names_the_replica_that_reported_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 47: Events carried no ``reportingInstance``; with three replicas nobody could tell which
    one wrote an Event. It is the operator's id (the chart sets the Pod name), else the host name."""
    from agentihooks_operator.k8s.events import COMPONENT, Notice, events_for

    monkeypatch.setenv("AGENTIHOOKS_OPERATOR_ID", "agentihooks-7d9f-abcde")
    notice = Notice("Fenced", "m", execution_id="exe-" + "a" * 32)
    for event in events_for(notice, swarm="example", namespace="team-a", swarm_uid="u"):
        assert event["reportingInstance"] == "agentihooks-7d9f-abcde"
        assert event["reportingComponent"] == COMPONENT
    monkeypatch.setenv("AGENTIHOOKS_OPERATOR_ID", "x" * 300)
    [event, _] = events_for(notice, swarm="example", namespace="team-a", swarm_uid="u")
    assert len(event["reportingInstance"]) == 128
    monkeypatch.delenv("AGENTIHOOKS_OPERATOR_ID")
    [event, _] = events_for(notice, swarm="example", namespace="team-a", swarm_uid="u")
    assert event["reportingInstance"]
