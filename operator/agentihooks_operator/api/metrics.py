"""``/metrics`` in the Prometheus text format (0.0.4), built from each swarm's counters in Redis.

Label values are fixed words (reasons, choices, decider kinds, continuity
types) and swarm names; never execution ids, agents or tokens.
"""

from __future__ import annotations

from collections.abc import Iterable

from .registry import SwarmEntry
from .state import ApiState

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: metric name → (type, help, counter family in Redis, label name)
FAMILIES = {
    "agentihooks_restore_outcomes_by_type": (
        "counter",
        "Verified restore outcomes by continuity type (native, reconstructed, fresh).",
        "restore_outcomes_by_type",
        "type",
    ),
    "agentihooks_fences_total": (
        "counter",
        "Attempts fenced, by failure reason.",
        "fences_by_reason",
        "reason",
    ),
    "agentihooks_decisions_by_choice_total": (
        "counter",
        "Accepted restore decisions by choice.",
        "decisions_by_choice",
        "choice",
    ),
    "agentihooks_decisions_by_decider_total": (
        "counter",
        "Accepted restore decisions by who decided (automation, operator, master).",
        "decisions_by_decider",
        "decider",
    ),
    "agentihooks_refusals_total": (
        "counter",
        "Refused recovery requests by reason.",
        "refusals_by_reason",
        "reason",
    ),
}


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _line(name: str, labels: dict[str, str], value: float) -> str:
    inner = ",".join(f'{k}="{_esc(v)}"' for k, v in labels.items())
    return f"{name}{{{inner}}} {value:g}"


def _family(counters: dict[str, int], family: str) -> dict[str, int]:
    prefix = family + ":"
    return {k[len(prefix) :]: v for k, v in counters.items() if k.startswith(prefix)}


def _swarm_lines(state: ApiState, entry: SwarmEntry) -> dict[str, list[str]]:
    counters = entry.recovery.metrics()
    out: dict[str, list[str]] = {}
    for name, (_kind, _help, family, label) in FAMILIES.items():
        values = _family(counters, family)
        if family == "restore_outcomes_by_type":
            values = {**{t: 0 for t in ("native", "reconstructed", "fresh")}, **values}
        out[name] = [_line(name, {"swarm": entry.name, label: k}, v) for k, v in sorted(values.items())]
    awaiting = sum(1 for c in entry.recovery.cards(entry.spec) if c.binding == "awaiting decision")
    out["agentihooks_seats_awaiting_decision"] = [
        _line("agentihooks_seats_awaiting_decision", {"swarm": entry.name}, awaiting)
    ]
    held = 1 if state.lease_held(entry) else 0
    out["agentihooks_lease_held"] = [_line("agentihooks_lease_held", {"swarm": entry.name}, held)]
    taken, lost = entry.recovery.lease_churn()
    out["agentihooks_lease_takeovers_total"] = [
        _line("agentihooks_lease_takeovers_total", {"swarm": entry.name}, taken)
    ]
    out["agentihooks_lease_losses_total"] = [
        _line("agentihooks_lease_losses_total", {"swarm": entry.name}, lost)
    ]
    if entry.pass_seconds is not None:
        out["agentihooks_pass_duration_seconds"] = [
            _line("agentihooks_pass_duration_seconds", {"swarm": entry.name}, round(entry.pass_seconds, 6))
        ]
    return out


GAUGES = {
    "agentihooks_seats_awaiting_decision": "Seats whose fenced attempt waits for a restore decision.",
    "agentihooks_lease_held": "1 when this controller holds the swarm's lease.",
    "agentihooks_pass_duration_seconds": "Duration of the swarm's last recovery pass.",
}


#: Counters of this replica alone (a sum over replicas is the swarm's total).
LOCAL_COUNTERS = {
    "agentihooks_lease_takeovers_total": "Times this replica took the swarm's lease with a new epoch "
    "(lease churn: a healthy holder renews, it does not take again).",
    "agentihooks_lease_losses_total": "Times this replica lost a lease it held to another holder.",
}


def render(state: ApiState, entries: Iterable[SwarmEntry]) -> str:
    """The whole exposition (blocking: reads Redis)."""
    per: dict[str, list[str]] = {}
    for entry in entries:
        for name, lines in _swarm_lines(state, entry).items():
            per.setdefault(name, []).extend(lines)
    text: list[str] = []
    for name, (kind, help_, _f, _l) in FAMILIES.items():
        text += [f"# HELP {name} {help_}", f"# TYPE {name} {kind}", *per.get(name, [])]
    for name, help_ in GAUGES.items():
        text += [f"# HELP {name} {help_}", f"# TYPE {name} gauge", *per.get(name, [])]
    for name, help_ in LOCAL_COUNTERS.items():
        text += [f"# HELP {name} {help_}", f"# TYPE {name} counter", *per.get(name, [])]
    return "\n".join(text) + "\n"
