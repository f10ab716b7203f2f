"""The restore_verified line, refusal counters and their Prometheus text."""

from __future__ import annotations

import io
import json
from pathlib import Path

from agentihooks_checkpoint.directive import Continuity, RestoreOutcome
from agentihooks_worker.metrics import RestoreMetrics
from agentihooks_worker.report import emit, restore_verified_line


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
    m.write_textfile(tmp_path / "metrics.prom")
    text = (tmp_path / "metrics.prom").read_text()
    assert 'agentihooks_worker_restore_outcomes_by_type{type="native"} 2' in text
    assert 'agentihooks_worker_restore_outcomes_by_type{type="refused/context_only"} 1' in text
