"""The restore_verified line, refusal counters and their Prometheus text."""

from __future__ import annotations

import io
import json
from pathlib import Path

from agentihooks_checkpoint.directive import Continuity, RestoreOutcome
from agentihooks_worker.metrics import RestoreMetrics
from agentihooks_worker.report import emit, restore_verified_line
from prometheus_client.parser import text_string_to_metric_families


def test_restore_verified_line_has_exactly_the_summary_fields() -> None:
    outcome = RestoreOutcome(
        execution_id="e-42",
        recovery=Continuity.NATIVE,
        checkpoint_id="ckpt-7",
        session_id="s-1",
        watermark=412,
    )
    line = restore_verified_line(outcome)
    assert json.loads(line) == {
        "event": "restore_verified",
        "execution_id": "e-42",
        "recovery": "native",
        "checkpoint_id": "ckpt-7",
        "watermark": 412,
    }
    out = io.StringIO()
    emit(line, out)
    assert out.getvalue() == line + "\n"


def test_fresh_line_names_no_checkpoint() -> None:
    line = json.loads(restore_verified_line(RestoreOutcome(execution_id="e-1", recovery=Continuity.FRESH)))
    assert line["checkpoint_id"] is None and line["watermark"] is None


def test_metrics_count_outcomes_and_refusals(tmp_path: Path) -> None:
    m = RestoreMetrics()
    m.outcome("native")
    m.outcome("native")
    m.refused("context_only")
    assert m.snapshot() == {"restore_outcomes_by_type": {"native": 2, "refused/context_only": 1}}
    m.refused('odd "reason"\\x')  # escaped in the exposition, not breaking the line
    m.write_textfile(tmp_path / "metrics.prom")
    text = (tmp_path / "metrics.prom").read_text()
    assert "# HELP agentihooks_worker_restore_outcomes_by_type_total " in text
    assert "# TYPE agentihooks_worker_restore_outcomes_by_type_total counter" in text
    assert 'agentihooks_worker_restore_outcomes_by_type_total{type="native"} 2.0' in text
    # read back by Prometheus's own parser: every sample, the odd label value intact
    families = text_string_to_metric_families(text)
    [family] = [f for f in families if f.name == "agentihooks_worker_restore_outcomes_by_type"]
    samples = {s.labels["type"]: s.value for s in family.samples if s.name.endswith("_total")}
    assert samples == {"native": 2.0, "refused/context_only": 1.0, 'refused/odd "reason"\\x': 1.0}
    assert not list(tmp_path.glob(".*"))  # the writer left no temporary file beside it
