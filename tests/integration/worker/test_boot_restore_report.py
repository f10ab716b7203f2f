"""The worker's restore counters reach Prometheus: a ``checkpoint_remote`` boot reports its restore
(result and duration, or its refusal reason) to the real control API, whose ``/metrics`` exports it.

The metrics file the worker also writes (``<attempt>/run/metrics.prom``) is kept too.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from agentihooks_worker.boot import Boot
from agentihooks_worker.errors import EXIT_REFUSED
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from testsupport.control_api import World, make_world

from .conftest import events
from .test_boot_remote import replacement_boot


def worker_series(w: World) -> dict[tuple[str, str], float]:
    r = httpx.get(w.url + "/metrics", headers={"Accept": "application/openmetrics-text;version=1.0.0"})
    out: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            counted = s.name in (
                "agentihooks_worker_restore_outcomes_total",
                "agentihooks_restore_duration_seconds_count",
            )
            if counted and s.labels["swarm"] == "swarm-a" and s.value:  # series not counted yet are 0
                out[(s.name, s.labels["type"])] = float(s.value)
    return out


def test_a_restored_worker_reports_its_result_and_duration(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTIHOOKS_CHECKPOINT_REMOTE", "false")  # undone after the test
    (tmp_path / "world").mkdir()
    with make_world(redis_url, tmp_path / "world") as w:
        boot, _, _ = replacement_boot(w, tmp_path)
        boot.prepare()
        # the same attempt booting again (its state kept) restores and reports nothing again
        Boot(boot.settings, environ=boot.environ).prepare()
        assert worker_series(w) == {
            ("agentihooks_worker_restore_outcomes_total", "native"): 1,
            ("agentihooks_restore_duration_seconds_count", "native"): 1,
        }
        files = list((tmp_path / "attempts").rglob("metrics.prom"))
        assert len(files) == 1 and 'type="native"} 1' in files[0].read_text()


def test_a_refusing_worker_reports_its_reason(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTIHOOKS_CHECKPOINT_REMOTE", "false")
    (tmp_path / "world").mkdir()
    with make_world(redis_url, tmp_path / "world") as w:
        boot, _, _ = replacement_boot(w, tmp_path)
        objects = sorted((tmp_path / "world" / "store").rglob("objects/sha256/*"))
        assert objects
        for path in objects:  # every object of the checkpoint now fails its hash
            path.write_bytes(b"not what the manifest names")
        assert boot.run() == EXIT_REFUSED
        reason = events(capsys.readouterr().err, "restore_refused")[0]["reason"]
        assert worker_series(w) == {
            ("agentihooks_worker_restore_outcomes_total", f"refused/{reason}"): 1,
            ("agentihooks_restore_duration_seconds_count", "refused"): 1,
        }
