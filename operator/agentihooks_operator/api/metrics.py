"""``/metrics``: the swarm families read from Redis at scrape time, plus the process's own instruments.

Encoded by ``prometheus_client``: OpenMetrics 1.0 when the scraper's ``Accept`` asks for it (as
Prometheus does), the classic text format 0.0.4 otherwise.

Two kinds of figures, so that a ``sum`` over replicas is right:

* **swarm-global** (:data:`GLOBAL`): the counters the recovery core keeps in Redis (fences,
  decisions, refusals, verified restore outcomes) and the seats awaiting a decision. Every replica
  could read them, so only the replica that holds the swarm's lease exports them; the others leave
  them out. ``sum by (swarm)`` over replicas is the swarm's figure.
* **per replica**: whether this replica holds the lease, its lease takeovers and losses, the last
  pass duration it measured, and the instruments of :class:`~..instruments.OperatorMetrics`
  (histograms, worker reports, Redis reachability, build and process information).

Label values are fixed words (reasons, choices, decider kinds, continuity types) and swarm names;
never execution ids, agents or tokens. Redis failing is never a failed scrape: the Redis-backed
families are left out and ``agentihooks_redis_up`` is 0.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import get_args

import redis
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    UnknownMetricFamily,
)
from prometheus_client.registry import Collector

from ..instruments import DECIDERS, KNOWN_REASONS
from ..k8s.observing.classify import Reason as FailureReason
from ..recovery.errors import RecoveryError
from .registry import SwarmEntry
from .state import ApiState

log = logging.getLogger("agentihooks.api")

#: The classic text format (what ``/metrics`` answers a scraper that does not ask for OpenMetrics).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
CONTINUITY = ("native", "reconstructed", "fresh")

#: Label values each Redis counter family exports at 0 until they happen (``increase()`` must see the
#: first event: a series that appears at 1 shows no increase).
KNOWN = {
    "restore_outcomes_by_type": CONTINUITY,
    "fences_by_reason": get_args(FailureReason),
    "lease_waits_by_reason": ("node_lost",),
    "lease_wait_overrides": ("operator",),
    "decisions_by_choice": ("resume", "fresh"),
    "decisions_by_decider": DECIDERS,
    "refusals_by_reason": ("not_pending", "no_checkpoint"),
    "restore_refusals": tuple(sorted(KNOWN_REASONS)),
    "retention_bytes": ("collected", "dry_run"),
    "retention_checkpoints": ("collected", "dry_run"),
}
#: Families whose label values come from reports: a value outside ``KNOWN`` is counted as ``other``.
CLOSED = frozenset({"restore_refusals"})
#: Counter families kept in Redis: family name (exposed with ``_total``) → (help, Redis family, label).
COUNTERS = {
    "agentihooks_restore_outcomes": (
        "Verified restore outcomes by continuity type (native, reconstructed, fresh).",
        "restore_outcomes_by_type",
        "type",
    ),
    "agentihooks_fences": ("Attempts fenced, by failure reason.", "fences_by_reason", "reason"),
    "agentihooks_lease_wait_overrides": (
        "Lease waits the operator ended by confirming the old attempt had stopped (confirm-stopped).",
        "lease_wait_overrides",
        "by",
    ),
    "agentihooks_lease_waits": (
        "Fenced attempts whose death was not proven: their replacement waited for the old worker's lease.",
        "lease_waits_by_reason",
        "reason",
    ),
    "agentihooks_decisions_by_choice": (
        "Accepted restore decisions by choice.",
        "decisions_by_choice",
        "choice",
    ),
    "agentihooks_decisions_by_decider": (
        "Accepted restore decisions by who decided (automation, operator, master).",
        "decisions_by_decider",
        "decider",
    ),
    "agentihooks_refusals": ("Refused recovery requests by reason.", "refusals_by_reason", "reason"),
    "agentihooks_retention_reclaimed_bytes": (
        "Bytes of checkpoint objects retention removed (collected) or would have (dry_run).",
        "retention_bytes",
        "mode",
    ),
    "agentihooks_retention_checkpoints": (
        "Superseded checkpoints retention removed (collected) or would have (dry_run).",
        "retention_checkpoints",
        "mode",
    ),
    "agentihooks_restore_refusals": (
        "Restores a replacement refused and reported (it waits for a relaunch), by reason.",
        "restore_refusals",
        "reason",
    ),
}
RELAUNCHES = "agentihooks_relaunches"
#: The spec's name for the verified outcomes, kept as it always was exposed (no ``_total``: an
#: OpenMetrics counter must end in ``_total``, so this family is typed ``unknown``; the counter form
#: is ``agentihooks_restore_outcomes_total``).
SPEC_OUTCOMES = "agentihooks_restore_outcomes_by_type"
AWAITING = "agentihooks_seats_awaiting_decision"
#: Exposed sample names exported by the lease holder only.
GLOBAL = frozenset({SPEC_OUTCOMES, AWAITING, f"{RELAUNCHES}_total", *(f"{name}_total" for name in COUNTERS)})


def _family(counters: dict[str, int], family: str) -> dict[str, int]:
    prefix = family + ":"
    found = {k[len(prefix) :]: v for k, v in counters.items() if k.startswith(prefix)}
    if family not in CLOSED:
        return found
    out: dict[str, int] = {}
    for k, v in found.items():
        label = k if k in KNOWN[family] else "other"
        out[label] = out.get(label, 0) + v
    return out


class SwarmCollector(Collector):
    """The families of the published swarms (blocking: reads Redis)."""

    def __init__(self, state: ApiState, entries: Iterable[SwarmEntry]) -> None:
        self.state = state
        self.entries = list(entries)

    def _redis_up(self) -> bool:
        try:
            return bool(self.state.redis.ping())
        except (redis.RedisError, OSError):
            return False

    def collect(self) -> Iterator[Metric]:
        up = self._redis_up()
        self.state.metrics.redis_up.set(1 if up else 0)
        counters = {
            name: CounterMetricFamily(name, h, labels=["namespace", "swarm", label])
            for name, (h, _f, label) in COUNTERS.items()
        }
        spec = UnknownMetricFamily(
            SPEC_OUTCOMES,
            "Verified restore outcomes by continuity type: the spec's name for "
            "agentihooks_restore_outcomes_total (same values; typed unknown because an OpenMetrics "
            "counter must end in _total).",
            labels=["namespace", "swarm", "type"],
        )
        relaunches = CounterMetricFamily(
            RELAUNCHES,
            "Refused restores launched again by a relaunch (the same directive, next generation).",
            labels=["namespace", "swarm"],
        )
        awaiting = GaugeMetricFamily(
            AWAITING,
            "Seats whose fenced attempt waits for a restore decision.",
            labels=["namespace", "swarm"],
        )
        held_g = GaugeMetricFamily(
            "agentihooks_lease_held",
            "1 when this replica holds the swarm's lease, else 0.",
            labels=["namespace", "swarm"],
        )
        last_pass = GaugeMetricFamily(
            "agentihooks_pass_duration_seconds",
            "Duration of the last recovery pass this replica ran as the swarm's lease holder.",
            labels=["namespace", "swarm"],
        )
        taken_c = CounterMetricFamily(
            "agentihooks_lease_takeovers",
            "Times this replica took the swarm's lease with a new epoch (a healthy holder renews, it "
            "does not take again).",
            labels=["namespace", "swarm"],
        )
        lost_c = CounterMetricFamily(
            "agentihooks_lease_losses",
            "Times this replica lost a lease it held to another holder.",
            labels=["namespace", "swarm"],
        )
        for entry in self.entries:
            self.state.metrics.ensure_swarm((entry.namespace, entry.name))
            taken, lost = entry.recovery.lease_churn()
            taken_c.add_metric([entry.namespace, entry.name], taken)
            lost_c.add_metric([entry.namespace, entry.name], lost)
            if entry.pass_seconds is not None:
                last_pass.add_metric([entry.namespace, entry.name], round(entry.pass_seconds, 6))
            if not up:
                continue
            try:
                held = self.state.lease_held(entry)
                held_g.add_metric([entry.namespace, entry.name], 1 if held else 0)
                if held:
                    raw = self._global(entry, counters, spec, awaiting)
                    relaunches.add_metric([entry.namespace, entry.name], raw.get("relaunches", 0))
            except (redis.RedisError, OSError, RecoveryError) as e:
                log.warning("metrics: swarm %s left out of this scrape (%s)", entry.name, type(e).__name__)
        yield from counters.values()
        yield relaunches
        yield spec
        yield awaiting
        yield held_g
        yield taken_c
        yield lost_c
        yield last_pass

    def _global(
        self,
        entry: SwarmEntry,
        counters: dict[str, CounterMetricFamily],
        spec: UnknownMetricFamily,
        awaiting: GaugeMetricFamily,
    ) -> dict[str, int]:
        """The swarm-global families: read from Redis, exported by the lease holder only (the raw
        counters are returned for the families built apart)."""
        raw = entry.recovery.metrics()
        cards = entry.recovery.cards(entry.spec)
        for name, (_help, family, _label) in COUNTERS.items():
            values = {**dict.fromkeys(KNOWN[family], 0), **_family(raw, family)}
            if family == "restore_outcomes_by_type":
                for k, v in sorted(values.items()):
                    spec.add_metric([entry.namespace, entry.name, k], v)
            for k, v in sorted(values.items()):
                counters[name].add_metric([entry.namespace, entry.name, k], v)
        waiting = sum(1 for c in cards if c.binding == "awaiting decision")
        awaiting.add_metric([entry.namespace, entry.name], waiting)
        return raw


class Exposition(Collector):
    """What one scrape answers: the process's instruments and the swarm families."""

    def __init__(self, state: ApiState, entries: Iterable[SwarmEntry]) -> None:
        self.swarms = SwarmCollector(state, entries)
        self.state = state

    def collect(self) -> Iterator[Metric]:
        swarms = list(self.swarms.collect())  # first: it sets agentihooks_redis_up
        yield from self.state.metrics.registry.collect()
        yield from swarms


def render(state: ApiState, entries: Iterable[SwarmEntry], accept: str | None = None) -> tuple[bytes, str]:
    """The whole exposition and its content type, in the format ``accept`` asks for (blocking)."""
    encoder, content_type = choose_encoder(accept or "")
    return encoder(Exposition(state, entries)), content_type
