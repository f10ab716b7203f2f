"""``/metrics`` from a swarm's counters through prometheus_client, and the operator hook that tracks Swarm
specs.

The exposition is parsed back with prometheus_client's own parsers (OpenMetrics and the classic text
format), so what is checked is what a Prometheus server reads, not the text's layout.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import redis
from agentihooks_operator.api import kopf_hooks
from agentihooks_operator.api.metrics import GLOBAL, render
from agentihooks_operator.api.registry import SwarmEntry, SwarmRegistry
from agentihooks_operator.instruments import KNOWN_REASONS, OperatorMetrics, of
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text
from prometheus_client.samples import Sample
from testsupport.control_api import swarm_with_masters

OPENMETRICS = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"


@dataclass
class _Card:
    binding: str


@dataclass
class _Recovery:  # the three reads the exposition makes, at the edge of a pure test
    counters: dict[str, int]
    cards_: list[_Card] = field(default_factory=list)
    churn: tuple[int, int] = (0, 0)

    def lease_churn(self) -> tuple[int, int]:
        return self.churn

    def metrics(self) -> dict[str, int]:
        return self.counters

    def cards(self, spec: Any) -> list[_Card]:
        return self.cards_


class _Redis:
    def __init__(self, up: bool) -> None:
        self.up = up

    def ping(self) -> bool:
        if not self.up:
            raise redis.ConnectionError("down")
        return True


class _State:
    def __init__(self, held: bool, *, up: bool = True) -> None:
        self.held = held
        self.redis = _Redis(up)
        self.metrics = OperatorMetrics(version="1.2.3")

    def lease_held(self, entry: SwarmEntry) -> bool:
        return self.held


COUNTERS = {
    "fences_by_reason:oom_killed": 2,
    "decisions_by_choice:resume": 1,
    "decisions_by_decider:master": 1,
    "refusals_by_reason:no_checkpoint": 3,
    "restore_outcomes_by_type:native": 1,
    "releases:grant": 2,
}


def _entry(name: str = 'a"b', namespace: str = "default") -> SwarmEntry:
    rec = _Recovery(COUNTERS, [_Card("awaiting decision"), _Card("bound")], (3, 1))
    return SwarmEntry(
        name,
        rec,  # type: ignore[arg-type]
        swarm_with_masters({}),
        "h",
        namespace=namespace,
        pass_seconds=0.25,
    )


def test_same_named_swarms_of_two_namespaces_are_two_series_never_one_sample_twice() -> None:
    state = _State(True)
    body, _ = render(state, [_entry("eng", "team-a"), _entry("eng", "team-b")], OPENMETRICS)  # type: ignore[arg-type]
    families = {f.name: f for f in parse_openmetrics(body.decode())}  # a duplicate sample fails to parse
    held = [s.labels for s in families["agentihooks_lease_held"].samples]
    assert held == [{"namespace": "team-a", "swarm": "eng"}, {"namespace": "team-b", "swarm": "eng"}]
    fences = {
        s.labels["namespace"]
        for s in families["agentihooks_fences"].samples
        if s.name.endswith("_total") and s.labels["reason"] == "oom_killed"
    }
    assert fences == {"team-a", "team-b"}


def _samples(state: _State, accept: str = OPENMETRICS) -> dict[str, list[Sample]]:
    body, content_type = render(state, [_entry()], accept)  # type: ignore[arg-type]
    text = body.decode()
    families = parse_openmetrics(text) if "openmetrics" in content_type else parse_text(text)
    out: dict[str, list[Sample]] = {}
    for family in families:
        for s in family.samples:
            out.setdefault(s.name, []).append(s)
    return out


def _value(samples: dict[str, list[Sample]], name: str, **labels: str) -> float | None:
    """The sample of ``name`` with exactly ``labels`` (a per-swarm family's ``namespace`` label is
    the entries' own, ``default``, unless ``labels`` names another)."""
    for s in samples.get(name, []):
        if s.labels == labels or ("swarm" in labels and s.labels == {"namespace": "default", **labels}):
            return float(s.value)
    return None


def test_the_openmetrics_parser_accepts_every_family_and_counters_end_in_total() -> None:
    state = _State(True)
    state.metrics.observe_pass(("default", 'a"b'), 0.3)
    state.metrics.observe_failover(("default", 'a"b'), "automation", 1.5)
    state.metrics.worker_report(("default", 'a"b'), "exe-1", "native", None, 2.0)
    body, content_type = render(state, [_entry()], OPENMETRICS)  # type: ignore[arg-type]
    assert content_type.startswith("application/openmetrics-text; version=1.0.0")
    families = {f.name: f for f in parse_openmetrics(body.decode())}
    assert body.decode().endswith("# EOF\n")
    for family in families.values():
        if family.type == "counter":
            assert all(s.name in (f"{family.name}_total", f"{family.name}_created") for s in family.samples)
    types = {name: f.type for name, f in families.items()}
    assert types["agentihooks_fences"] == "counter"
    assert types["agentihooks_restore_outcomes"] == "counter"
    assert types["agentihooks_restore_outcomes_by_type"] == "unknown"  # the spec's name, kept
    assert types["agentihooks_recovery_pass_duration_seconds"] == "histogram"
    assert types["agentihooks_failover_latency_seconds"] == "histogram"
    assert types["agentihooks_restore_duration_seconds"] == "histogram"
    assert types["agentihooks_build"] == "info"
    assert types["process_cpu_seconds"] == "counter"  # prometheus_client's process collector
    samples = _samples(state)
    assert _value(samples, "agentihooks_build_info", version="1.2.3") == 1
    assert _value(samples, "agentihooks_fences_total", swarm='a"b', reason="oom_killed") == 2
    assert _value(samples, "agentihooks_refusals_total", swarm='a"b', reason="no_checkpoint") == 3
    assert _value(samples, "agentihooks_decisions_by_decider_total", swarm='a"b', decider="master") == 1
    for kind, want in (("native", 1), ("reconstructed", 0), ("fresh", 0)):  # all three always present
        assert _value(samples, "agentihooks_restore_outcomes_total", swarm='a"b', type=kind) == want
        assert _value(samples, "agentihooks_restore_outcomes_by_type", swarm='a"b', type=kind) == want
    assert _value(samples, "agentihooks_seats_awaiting_decision", swarm='a"b') == 1
    assert _value(samples, "agentihooks_lease_held", swarm='a"b') == 1
    assert _value(samples, "agentihooks_pass_duration_seconds", swarm='a"b') == 0.25
    assert _value(samples, "agentihooks_lease_takeovers_total", swarm='a"b') == 3
    assert _value(samples, "agentihooks_lease_losses_total", swarm='a"b') == 1
    assert _value(samples, "agentihooks_recovery_pass_duration_seconds_count", swarm='a"b') == 1
    assert (
        _value(samples, "agentihooks_failover_latency_seconds_sum", swarm='a"b', decider="automation") == 1.5
    )
    assert _value(samples, "agentihooks_restore_duration_seconds_count", swarm='a"b', type="native") == 1
    assert _value(samples, "agentihooks_worker_restore_outcomes_total", swarm='a"b', type="native") == 1
    assert _value(samples, "agentihooks_redis_up") == 1
    assert not any("releases" in name for name in samples)


def test_the_classic_text_format_without_an_openmetrics_accept() -> None:
    state = _State(True)
    body, content_type = render(state, [_entry()], "")  # type: ignore[arg-type]
    assert content_type == "text/plain; version=0.0.4; charset=utf-8"
    lines = body.decode().splitlines()
    assert "# TYPE agentihooks_fences_total counter" in lines
    assert "# TYPE agentihooks_restore_outcomes_by_type untyped" in lines
    samples = _samples(state, "text/plain")
    assert _value(samples, "agentihooks_restore_outcomes_by_type", swarm='a"b', type="native") == 1
    assert _value(samples, "agentihooks_build_info", version="1.2.3") == 1


def test_swarm_global_figures_come_from_the_lease_holder_only() -> None:
    """Two replicas read the same Redis counters; only the holder exports them, so a sum is right."""
    holder, other = _samples(_State(True)), _samples(_State(False))
    exported = {name for name in holder if name.startswith("agentihooks_")}
    assert exported >= GLOBAL
    assert not GLOBAL & set(other), "a replica without the lease exports no swarm-global figure"
    assert _value(other, "agentihooks_lease_held", swarm='a"b') == 0
    for name in GLOBAL:
        total = sum(float(s.value) for s in holder.get(name, []) + other.get(name, []))
        assert total == sum(float(s.value) for s in holder[name])
    # per-replica figures are exported by every replica (each its own)
    assert _value(other, "agentihooks_lease_takeovers_total", swarm='a"b') == 3


def test_redis_unavailable_is_a_gauge_not_a_failed_scrape() -> None:
    samples = _samples(_State(True, up=False))
    assert _value(samples, "agentihooks_redis_up") == 0
    assert not GLOBAL & set(samples)
    assert "agentihooks_lease_held" not in samples  # unknown without Redis: left out, not 0
    assert _value(samples, "agentihooks_lease_takeovers_total", swarm='a"b') == 3
    assert "process_cpu_seconds_total" in samples


def test_worker_reports_are_counted_once_per_execution_with_fixed_label_values() -> None:
    m = OperatorMetrics(process=False)
    assert m.worker_report("s", "exe-1", "refused", "corrupt_object", 1.0)
    assert not m.worker_report("s", "exe-1", "refused", "corrupt_object", 1.0), "a retried report"
    assert m.worker_report("s", "exe-2", "refused", "made_up_by_someone", None)
    assert m.worker_report("s", "exe-3", "refused", None, None)
    assert m.worker_report("s", "exe-4", "fresh", "ignored", 0.5)
    got = {
        s.labels["type"]: s.value
        for f in m.registry.collect()
        if f.name == "agentihooks_worker_restore_outcomes"
        for s in f.samples
        if s.name.endswith("_total")
    }
    assert got == {"refused/corrupt_object": 1, "refused/other": 2, "fresh": 1}
    assert "corrupt_object" in KNOWN_REASONS and "outcome_refused" in KNOWN_REASONS


def test_each_operator_process_has_its_own_registry() -> None:
    a, b = OperatorMetrics(), OperatorMetrics()
    a.observe_pass("s", 1.0)
    assert a.registry is not b.registry
    assert (
        b.registry.get_sample_value("agentihooks_recovery_pass_duration_seconds_count", {"swarm": "s"})
        is None
    )
    memo: dict[str, Any] = {}
    assert of(memo) is of(memo)


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


def test_series_exist_at_zero_before_their_first_event() -> None:
    """``increase()`` never sees the first event of a series that appears at 1: every known label set
    of a published swarm is exported at 0 first, and a deleted swarm's series go."""
    samples = _samples(_State(True))
    for reason in ("oom_killed", "evicted", "node_lost", "image_pull", "application_exit"):
        want = 2 if reason == "oom_killed" else 0
        assert _value(samples, "agentihooks_fences_total", swarm='a"b', reason=reason) == want
    assert _value(samples, "agentihooks_decisions_by_choice_total", swarm='a"b', choice="fresh") == 0
    assert _value(samples, "agentihooks_decisions_by_decider_total", swarm='a"b', decider="automation") == 0
    assert _value(samples, "agentihooks_refusals_total", swarm='a"b', reason="not_pending") == 0
    for kind in ("native", "refused/corrupt_object", "refused/store_unreachable", "refused/other"):
        assert _value(samples, "agentihooks_worker_restore_outcomes_total", swarm='a"b', type=kind) == 0
    assert _value(samples, "agentihooks_failover_latency_seconds_count", swarm='a"b', decider="master") == 0
    assert _value(samples, "agentihooks_restore_duration_seconds_count", swarm='a"b', type="refused") == 0
    assert _value(samples, "agentihooks_recovery_pass_duration_seconds_count", swarm='a"b') == 0
    m = OperatorMetrics(process=False)
    m.ensure_swarm("gone")
    m.ensure_swarm("kept")
    m.forget_swarm("gone")
    swarms = {s.labels.get("swarm") for f in m.registry.collect() for s in f.samples} - {None}
    assert swarms == {"kept"}
