"""An outcome is accepted only when it equals the directive in all four fields, watermark included.

The controller (real aiohttp app, real Redis, real local store) accepts a
native resume. A report that differs from the directive in continuity,
checkpoint, session or watermark is refused with 409 ``directive_mismatch``
and nothing is stored as verified: no outcome record, no count, the task stays
held. A real worker whose launch record carries another watermark than the
checkpoint's restores the checkpoint honestly, is refused when it reports, and
never starts its harness.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_worker.errors import EXIT_REFUSED
from testsupport.checkpoints import edit_record
from testsupport.control_api import World, make_world

from .conftest import events, harness_runs
from .test_boot_remote import replacement_boot


def stored(w: World, execution_id: str) -> Any:
    raw = w.client.hget(w.recoveries["swarm-a"].keys.restore_outcomes, execution_id)
    return json.loads(raw) if raw else None


def task_row(w: World) -> dict[str, Any]:
    return dict(json.loads(w.client.hget(w.recoveries["swarm-a"].keys.ledger_tasks, "task-1")))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("watermark", +1),
        ("watermark", -1),
        ("recovery", "reconstructed"),
        ("checkpoint_id", "ckpt-x"),
        ("session_id", "sess-9"),
    ],
)
def test_an_outcome_that_differs_from_the_directive_is_refused_and_not_stored(
    redis_url: str, tmp_path: Path, field: str, value: Any
) -> None:
    (tmp_path / "world").mkdir()
    with make_world(redis_url, tmp_path / "world") as w:
        _, new, built = replacement_boot(w, tmp_path)
        directive = w.launcher.pods[new].directive
        assert directive is not None and directive.watermark == built.watermark
        body: dict[str, Any] = {"execution_id": new, **directive.model_dump(mode="json")}
        if field == "watermark":
            body["watermark"] = built.watermark + value
        elif field == "recovery":
            body["recovery"], body["session_id"] = value, None
        else:
            body[field] = value
        before = task_row(w)
        r = w.call("POST", f"/v1/executions/{new}/outcome", w.worker_token(new), json=body)
        assert r.status_code == 409, r.text
        assert r.json() == {
            "error": "directive_mismatch",
            "message": "the outcome does not match the accepted directive",
        }
        assert stored(w, new) is None
        assert w.recoveries["swarm-a"].restore_outcomes_by_type == {
            "native": 0,
            "reconstructed": 0,
            "fresh": 0,
        }
        assert task_row(w) == before and before["awaiting"] == "recovery_pending"
        # The exact directive is still accepted afterwards, and stored as verified.
        exact = {"execution_id": new, **directive.model_dump(mode="json")}
        ok = w.call("POST", f"/v1/executions/{new}/outcome", w.worker_token(new), json=exact)
        assert ok.status_code == 200 and ok.json()["status"] == "verified"
        assert stored(w, new)["watermark"] == built.watermark


def test_a_worker_restored_to_another_watermark_is_refused_and_starts_nothing(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "world").mkdir()
    with make_world(redis_url, tmp_path / "world") as w:
        boot, new, built = replacement_boot(w, tmp_path)
        # After the decision, a hostile writer re-commits the checkpoint with the transcript cut
        # one record earlier: it still verifies, but it is not what the directive restores to.
        scope = StoreScope(swarm="swarm-a", task_id="task-1", task_generation=1, namespace="default")
        edit_record(
            w.store,
            scope,
            built.checkpoint_id,
            lambda r: r["transcript_durable_cursor"].update(sequence=built.watermark - 1),
        )
        assert boot.run() == EXIT_REFUSED
        err = capsys.readouterr().err
        [refused] = events(err, "restore_refused")
        assert refused["reason"] == "outcome_refused" and "directive_mismatch" in refused["message"]
        assert events(err, "restore_verified") == []
        assert harness_runs(tmp_path) == []
        assert stored(w, new) is None
        assert task_row(w)["awaiting"] == "recovery_pending"
