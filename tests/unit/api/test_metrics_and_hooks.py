"""Prometheus rendering from a swarm's counters, and the operator hook that tracks Swarm specs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentihooks_operator.api import kopf_hooks
from agentihooks_operator.api.metrics import render
from agentihooks_operator.api.registry import SwarmEntry, SwarmRegistry
from testsupport.control_api import swarm_with_masters


@dataclass
class _Card:
    binding: str


@dataclass
class _Recovery:  # the three reads render makes, at the edge of a pure test
    counters: dict[str, int]
    cards_: list[_Card] = field(default_factory=list)
    churn: tuple[int, int] = (0, 0)

    def lease_churn(self) -> tuple[int, int]:
        return self.churn

    def metrics(self) -> dict[str, int]:
        return self.counters

    def cards(self, spec: Any) -> list[_Card]:
        return self.cards_


class _State:
    def __init__(self, held: bool) -> None:
        self.held = held

    def lease_held(self, entry: SwarmEntry) -> bool:
        return self.held


def test_every_family_is_rendered_with_help_type_and_labels() -> None:
    rec = _Recovery(
        {
            "fences_by_reason:oom_killed": 2,
            "decisions_by_choice:resume": 1,
            "decisions_by_decider:master": 1,
            "refusals_by_reason:no_checkpoint": 3,
            "restore_outcomes_by_type:native": 1,
            "releases:grant": 2,
        },
        [_Card("awaiting decision"), _Card("bound")],
        (3, 1),
    )
    entry = SwarmEntry('a"b', rec, swarm_with_masters({}), "h", pass_seconds=0.25)  # type: ignore[arg-type]
    text = render(_State(True), [entry])  # type: ignore[arg-type]
    lines = text.splitlines()
    assert 'agentihooks_fences_total{swarm="a\\"b",reason="oom_killed"} 2' in lines
    assert 'agentihooks_refusals_total{swarm="a\\"b",reason="no_checkpoint"} 3' in lines
    assert 'agentihooks_restore_outcomes_by_type{swarm="a\\"b",type="fresh"} 0' in lines
    assert 'agentihooks_seats_awaiting_decision{swarm="a\\"b"} 1' in lines
    assert 'agentihooks_lease_held{swarm="a\\"b"} 1' in lines
    assert 'agentihooks_pass_duration_seconds{swarm="a\\"b"} 0.25' in lines
    assert 'agentihooks_lease_takeovers_total{swarm="a\\"b"} 3' in lines
    assert 'agentihooks_lease_losses_total{swarm="a\\"b"} 1' in lines
    assert "# TYPE agentihooks_lease_takeovers_total counter" in lines
    names = [line.split()[2] for line in lines if line.startswith("# TYPE")]
    assert len(names) == len(set(names)) == 10
    assert "releases" not in text


def test_swarm_specs_are_tracked_and_invalid_or_deleted_ones_withdrawn() -> None:
    memo: dict[str, Any] = {kopf_hooks.REGISTRY: SwarmRegistry()}
    spec = swarm_with_masters({"m": "s"}).model_dump(by_alias=True)
    kopf_hooks.swarm_seen({"type": "ADDED"}, spec, "ex", "ns", memo)
    assert memo[kopf_hooks.SPECS][("ns", "ex")].masters[0].agent == "m"
    kopf_hooks.swarm_seen({"type": "MODIFIED"}, {"image": ""}, "ex", "ns", memo)
    assert ("ns", "ex") not in memo[kopf_hooks.SPECS]
    kopf_hooks.swarm_seen({"type": "ADDED"}, spec, "ex", "ns", memo)
    kopf_hooks.swarm_seen({"type": "DELETED"}, spec, "ex", "ns", memo)
    assert memo[kopf_hooks.SPECS] == {}
