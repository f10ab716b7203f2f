"""Restore counters: outcomes by continuity type and refusals as ``refused/<reason>``.

Both live under the one metric name ``restore_outcomes_by_type`` (the spec's
name). The worker is a short-lived process, so besides the in-memory view the
counters are written as a Prometheus text file an exporter can pick up.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from pathlib import Path

METRIC = "restore_outcomes_by_type"


class RestoreMetrics:
    """Thread-safe counters keyed by type (``native``) or ``refused/<reason>``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def outcome(self, recovery: str) -> None:
        with self._lock:
            self._counts[recovery] += 1

    def refused(self, reason: str) -> None:
        with self._lock:
            self._counts[f"refused/{reason}"] += 1

    def snapshot(self) -> dict[str, dict[str, int]]:
        """``{"restore_outcomes_by_type": {"native": 1, "refused/context_only": 2}}``."""
        with self._lock:
            return {METRIC: dict(sorted(self._counts.items()))}

    def prometheus(self) -> str:
        """The counters in Prometheus text exposition format."""
        lines = [f"# TYPE agentihooks_worker_{METRIC} counter"]
        for key, value in self.snapshot()[METRIC].items():
            lines.append(f'agentihooks_worker_{METRIC}{{type="{key}"}} {value}')
        return "\n".join(lines) + "\n"

    def write_textfile(self, path: Path) -> None:
        """Replace ``path`` atomically with :meth:`prometheus`."""
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(self.prometheus())
        os.replace(tmp, path)
