"""Restore counters: outcomes by continuity type and refusals as ``refused/<reason>``.

Both live under the one metric name ``restore_outcomes_by_type`` (the spec's
name). The worker is a short-lived process, so besides the in-memory view the
counters are written as a Prometheus text file an exporter (node-exporter's
textfile collector) can pick up: ``agentihooks_worker_restore_outcomes_by_type_total``,
with its HELP and TYPE lines and label values escaped, by prometheus_client's
own exposition and atomic file writer.
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest, write_to_textfile
from prometheus_client import Counter as PromCounter

METRIC = "restore_outcomes_by_type"
EXPOSED = f"agentihooks_worker_{METRIC}"


class RestoreMetrics:
    """Thread-safe counters keyed by type (``native``) or ``refused/<reason>``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._registry = CollectorRegistry(auto_describe=True)
        self._counter = PromCounter(
            EXPOSED,
            "Restores of this worker by the continuity delivered (native, reconstructed, fresh), "
            "and refusals as refused/<reason>.",
            ["type"],
            registry=self._registry,
        )

    def _count(self, key: str) -> None:
        with self._lock:
            self._counts[key] += 1
            self._counter.labels(type=key).inc()

    def outcome(self, recovery: str) -> None:
        self._count(recovery)

    def refused(self, reason: str) -> None:
        self._count(f"refused/{reason}")

    def snapshot(self) -> dict[str, dict[str, int]]:
        """``{"restore_outcomes_by_type": {"native": 1, "refused/context_only": 2}}``."""
        with self._lock:
            return {METRIC: dict(sorted(self._counts.items()))}

    def prometheus(self) -> str:
        """The counters in Prometheus text exposition format."""
        return generate_latest(self._registry).decode("utf-8")

    def write_textfile(self, path: Path) -> None:
        """Replace ``path`` atomically with :meth:`prometheus`."""
        write_to_textfile(str(path), self._registry)
