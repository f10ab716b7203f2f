"""Ready from a non-holder (nobody holds the lease), and the InvalidSpec Event once per message."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from agentihooks_operator.k8s import specstatus, swarmpass
from agentihooks_operator.k8s.building.pods import Owner
from agentihooks_operator.k8s.errors import ApiError


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _pass(holder: list[str | None]) -> swarmpass.SwarmPass:
    runner = object.__new__(swarmpass.SwarmPass)
    runner.recovery = SimpleNamespace(lease_holder=lambda: holder[0])  # type: ignore[assignment]
    runner.owner = Owner(name="s", namespace="ns", uid=None, controller="op-a")
    runner._lease_ms = 15000
    runner._unheld_since = None
    return runner


def test_ready_false_only_once_nobody_held_the_lease_for_longer_than_its_ttl(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = _Clock()
    monkeypatch.setattr(swarmpass.time, "monotonic", clock)
    holder: list[str | None] = ["op-b"]
    runner = _pass(holder)
    assert runner._unheld() is None  # another replica holds it: nothing to say
    holder[0] = None
    assert runner._unheld() is None  # just expired: the placement's replica may take it now
    clock.now += 15.0
    assert runner._unheld() is None
    clock.now += 0.5
    verdict = runner._unheld()
    assert verdict is not None and (verdict.status, verdict.reason) == ("False", "LeaseUnheld")
    assert "ns/s" in verdict.message and "15 s" in verdict.message
    later = runner._unheld()
    assert later == verdict  # the same words while it lasts: one write, not one per pass
    holder[0] = "op-c"
    assert runner._unheld() is None
    holder[0] = None
    assert runner._unheld() is None  # the clock starts again


class _Kube:
    def __init__(self, refuse: bool = False) -> None:
        self.created: list[dict[str, Any]] = []
        self.refuse = refuse

    def create(self, resource: str, namespace: str, body: dict[str, Any]) -> None:
        if self.refuse:
            raise ApiError(403, "POST", "events", "Forbidden")
        assert resource == "events"
        self.created.append(body)


def test_one_invalid_spec_event_per_distinct_message() -> None:
    memo: dict[str, Any] = {}
    kube = _Kube()
    meta = {"uid": "u-1"}
    assert specstatus.post_invalid(memo, kube, "ns", "s", meta=meta, message="seat a: bad")  # type: ignore[arg-type]
    assert not specstatus.post_invalid(memo, kube, "ns", "s", meta=meta, message="seat a: bad")  # type: ignore[arg-type]
    assert specstatus.post_invalid(memo, kube, "ns", "s", meta=meta, message="seat b: bad")  # type: ignore[arg-type]
    assert specstatus.post_invalid(memo, kube, "ns", "other", meta=meta, message="seat b: bad")  # type: ignore[arg-type]
    first = kube.created[0]
    assert first["type"] == "Warning" and first["reason"] == "InvalidSpec"
    assert first["involvedObject"]["kind"] == "Swarm" and first["involvedObject"]["uid"] == "u-1"
    assert first["message"] == "swarm ns/s: the spec is invalid: seat a: bad"
    assert len(kube.created) == 3


def test_an_event_refused_is_tried_again_next_time() -> None:
    memo: dict[str, Any] = {}
    assert not specstatus.post_invalid(memo, _Kube(refuse=True), "ns", "s", meta={}, message="bad")  # type: ignore[arg-type]
    assert specstatus.post_invalid(memo, _Kube(), "ns", "s", meta={}, message="bad")  # type: ignore[arg-type]
