"""The operator process's own Prometheus instruments: one :class:`OperatorMetrics` per process.

Everything here is *per replica*: what this process measured itself (recovery pass durations,
failover latencies of the replacements it created, the worker reports it received) and the
process/build information. The swarm-global counters kept in Redis are not here: the control API
reads them at scrape time (:mod:`.api.metrics`) and exports them from the lease holder only.

Each :class:`OperatorMetrics` has its own :class:`~prometheus_client.CollectorRegistry` (never the
library's global default), so several operators can run in one test process without sharing
series. The operator keeps its instance in kopf's memo (:func:`of`); the control API finds it in
its :class:`~.api.state.ApiState`.

:class:`TimedLauncher` wraps the Kubernetes launcher: when it answers ``created`` for a
replacement, it observes the failover latency, from the fence of the attempt it replaces (the
recovery pass that saw the failure writes ``fenced_at_ms``) to the replacement's Pod being created.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, MutableMapping
from importlib import metadata
from typing import Any, Literal

import redis
from agentihooks_checkpoint.reasons import Reason
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
)

from .recovery.identity import SwarmId
from .recovery.launcher import ReplacementLauncher
from .recovery.models import LaunchPlan
from .recovery.policy import decider_kind
from .recovery.steps.launchseen import deleted, launched, seen
from .recovery.store.keys import SwarmKeys
from .recovery.store.records import DecisionRecord, FenceRecord

log = logging.getLogger("agentihooks.metrics")

#: The memo key of the process's :class:`OperatorMetrics`.
MEMO_KEY = "operator_metrics"
DISTRIBUTION = "agentihooks-recovery"

#: A recovery pass: Redis scripts and a few Kubernetes calls; long ones launch many replacements.
PASS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
#: Fence to replacement created: about a pass when automation decides, minutes to hours when a
#: person or a master has to choose.
FAILOVER_BUCKETS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 1800.0, 3600.0, 14400.0)
#: A worker's boot up to its verified restore: checkout, download, verification, source.
RESTORE_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)

#: The continuity a worker reports, or ``refused``.
WorkerResult = Literal["native", "reconstructed", "fresh", "refused"]
RESULTS: tuple[WorkerResult, ...] = ("native", "reconstructed", "fresh", "refused")
DECIDERS = ("automation", "operator", "master")
#: Refusal reasons a worker may report besides the contract's :class:`Reason` table (label values are
#: fixed words: anything else is counted as ``refused/other``).
WORKER_ONLY_REASONS = frozenset({"no_checkpoint_store", "forbidden_scope", "outcome_refused", "source"})
KNOWN_REASONS = frozenset(r.value for r in Reason) | WORKER_ONLY_REASONS
#: How many executions' reports are remembered, so a worker's retried report is counted once.
REPORTS_REMEMBERED = 10000


def package_version() -> str:
    """The installed distribution's version (``unknown`` when running from a bare source tree)."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown"


#: What names a swarm's series: its identity, its keys, or (name-only layout) its name alone.
Named = SwarmId | SwarmKeys | tuple[str, str] | str


def labels_of(swarm: Named) -> tuple[str, str]:
    """``(namespace, swarm)`` label values: two same-named Swarms of two namespaces never share a
    series (``""`` is the namespace of a name-only swarm)."""
    if isinstance(swarm, SwarmId):
        return swarm.namespace, swarm.name
    if isinstance(swarm, SwarmKeys):
        return swarm.namespace or "", swarm.swarm
    if isinstance(swarm, tuple):
        return swarm
    return "", swarm


class OperatorMetrics:
    """The per-replica instruments of one operator process, in a registry of their own."""

    def __init__(self, *, version: str | None = None, process: bool = True) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        if process:
            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)
        self.version = version or package_version()
        Info(
            "agentihooks_build",
            "The operator's version (always 1; the version is the label).",
            registry=self.registry,
        ).info({"version": self.version})
        self.pass_duration = Histogram(
            "agentihooks_recovery_pass_duration_seconds",
            "Duration of the recovery passes this replica ran as the swarm's lease holder.",
            ["namespace", "swarm"],
            buckets=PASS_BUCKETS,
            registry=self.registry,
        )
        self.failover_latency = Histogram(
            "agentihooks_failover_latency_seconds",
            "From the fence of a failed attempt (the pass that saw the failure) to its replacement's Pod "
            "created by this replica, by who decided (automation, operator, master).",
            ["namespace", "swarm", "decider"],
            buckets=FAILOVER_BUCKETS,
            registry=self.registry,
        )
        self.restore_duration = Histogram(
            "agentihooks_restore_duration_seconds",
            "A worker's boot up to its verified restore (or its refusal), as the worker reported it to "
            "this replica, by result (native, reconstructed, fresh, refused).",
            ["namespace", "swarm", "type"],
            buckets=RESTORE_BUCKETS,
            registry=self.registry,
        )
        self.worker_restores = Counter(
            "agentihooks_worker_restore_outcomes",
            "Restores workers reported to this replica: native, reconstructed, fresh, or "
            "refused/<reason> (the worker's own restore_outcomes_by_type).",
            ["namespace", "swarm", "type"],
            registry=self.registry,
        )
        self.redis_up = Gauge(
            "agentihooks_redis_up",
            "1 when this replica's Redis answered PING at the last scrape, else 0.",
            registry=self.registry,
        )
        self._lock = threading.Lock()
        self._reported: OrderedDict[str, None] = OrderedDict()
        self._swarms: set[tuple[str, str]] = set()

    def _worker_types(self) -> list[str]:
        return [*RESULTS[:3], *(f"refused/{r}" for r in sorted(KNOWN_REASONS)), "refused/other"]

    def ensure_swarm(self, named: Named) -> None:
        """Create the swarm's series at zero before anything happens, so that ``rate()`` and
        ``increase()`` see its first event (a series that appears at 1 shows no increase)."""
        swarm = labels_of(named)
        with self._lock:
            if swarm in self._swarms:
                return
            self._swarms.add(swarm)
        self.pass_duration.labels(*swarm)
        for decider in DECIDERS:
            self.failover_latency.labels(*swarm, decider)
        for result in RESULTS:
            self.restore_duration.labels(*swarm, result)
        for kind in self._worker_types():
            self.worker_restores.labels(*swarm, kind)

    def forget_swarm(self, named: Named) -> None:
        """Drop a deleted swarm's series (made again if it comes back)."""
        swarm = labels_of(named)
        with self._lock:
            self._swarms.discard(swarm)
        for metric, keys in (
            (self.pass_duration, [swarm]),
            (self.failover_latency, [(*swarm, d) for d in DECIDERS]),
            (self.restore_duration, [(*swarm, r) for r in RESULTS]),
            (self.worker_restores, [(*swarm, k) for k in self._worker_types()]),
        ):
            for key in keys:
                with contextlib.suppress(KeyError):
                    metric.remove(*key)

    def observe_pass(self, swarm: Named, seconds: float) -> None:
        self.pass_duration.labels(*labels_of(swarm)).observe(max(0.0, seconds))

    def observe_failover(self, swarm: Named, decider: str, seconds: float) -> None:
        self.failover_latency.labels(*labels_of(swarm), decider).observe(max(0.0, seconds))

    def worker_report(
        self,
        swarm: Named,
        execution_id: str,
        result: WorkerResult,
        reason: str | None,
        restore_seconds: float | None,
    ) -> bool:
        """Count a worker's restore report once per execution; False for a repeat (not counted)."""
        with self._lock:
            if execution_id in self._reported:
                return False
            self._reported[execution_id] = None
            while len(self._reported) > REPORTS_REMEMBERED:
                self._reported.popitem(last=False)
        known = reason if reason in KNOWN_REASONS else "other"
        label = f"refused/{known}" if result == "refused" else result
        self.worker_restores.labels(*labels_of(swarm), label).inc()
        if restore_seconds is not None:
            self.restore_duration.labels(*labels_of(swarm), result).observe(max(0.0, restore_seconds))
        return True


def of(memo: MutableMapping[str, Any]) -> OperatorMetrics:
    """The process's instruments, kept in kopf's memo (made on first use)."""
    found = memo.get(MEMO_KEY)
    if isinstance(found, OperatorMetrics):
        return found
    made: OperatorMetrics = memo.setdefault(MEMO_KEY, OperatorMetrics())
    return made


class TimedLauncher:
    """A :class:`~.recovery.launcher.ReplacementLauncher` that times failovers (see the module doc).

    Measuring never changes what the launch did: a failure to read the fence or the clock is logged
    at debug level and the observation is skipped.
    """

    def __init__(
        self,
        inner: ReplacementLauncher,
        *,
        metrics: OperatorMetrics,
        client: redis.Redis,
        keys: SwarmKeys,
        clock: Callable[[], int],
    ) -> None:
        self.inner = inner
        self.metrics = metrics
        self.client = client
        self.keys = keys
        self.clock = clock

    def launch(self, plan: LaunchPlan) -> Literal["created", "exists"]:
        answer = self.inner.launch(plan)
        if answer == "created" and plan.restore_from is not None:
            try:
                self._observe(plan.restore_from.execution_id)
            except Exception as e:  # a metric never breaks a recovery
                log.debug("failover latency of %s not measured (%s)", plan.execution_id, type(e).__name__)
        return answer

    def _observe(self, fenced: str) -> None:
        pipe = self.client.pipeline(transaction=False)
        pipe.hget(self.keys.attempt_fences, fenced)
        pipe.hget(self.keys.attempt_recoveries, fenced)
        raw_fence, raw_decision = pipe.execute()
        now_ms = self.clock()
        if not raw_fence:
            return
        fence = FenceRecord.model_validate_json(raw_fence)
        decided_by = DecisionRecord.model_validate_json(raw_decision).decided_by if raw_decision else None
        decider = decider_kind(decided_by) if decided_by else "automation"
        self.metrics.observe_failover(self.keys, decider, (now_ms - fence.fenced_at_ms) / 1000)

    def exists(self, execution_id: str) -> bool:
        return self.inner.exists(execution_id)

    def launched(self, execution_id: str) -> bool:
        """The inner launcher's ``launched`` when it has one
        (see :func:`~.recovery.steps.launchseen.launched`)."""
        return launched(self.inner, execution_id)

    def launch_seen(self, execution_id: str) -> str:
        """The inner launcher's observation (see :func:`~.recovery.steps.launchseen.seen`)."""
        return seen(self.inner, execution_id)

    def deleted(self, execution_id: str) -> bool:
        """The inner launcher's ``deleted`` when it has one
        (see :func:`~.recovery.steps.launchseen.deleted`)."""
        return deleted(self.inner, execution_id)

    def retire(self, execution_id: str) -> None:
        self.inner.retire(execution_id)
