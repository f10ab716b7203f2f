"""A worker booting from the original's launch record whose task id holds ':' and '/' (rule LAUNCH-2).

Real boot steps (attempt folder, onboarding, the store, the restorer) on a real local store;
the harness is not started. Such a task id names no checkpoint (a manifest's task id is an
identifier), so the worker starts fresh and takes no capture, and a checkpoint directive for
it is refused ``scope_mismatch`` instead of crashing the boot.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from agentihooks_worker.boot import Boot
from agentihooks_worker.errors import EXIT_REFUSED
from agentihooks_worker.settings import WorkerSettings
from testsupport.fake_harness import BIN, CLAUDE
from testsupport.original_records import original_launch_record

TASK = "github.com/acme/app:issue/42"


def boot(tmp_path: Path, **launch: Any) -> Boot:
    (tmp_path / "store").mkdir(exist_ok=True)
    record = original_launch_record(task_id=TASK)
    record["agent"] = [str(CLAUDE), "-p", "go"]
    record["registration"] = {"projects": ["local:app"], "task_generation": 1, "compatibility_key": "v1"}
    record.update(launch)
    (tmp_path / "launch.json").write_text(json.dumps(record))
    settings = WorkerSettings(
        checkpoint_root=str(tmp_path / "store"),
        attempts_dir=tmp_path / "attempts",
        launch_record=tmp_path / "launch.json",
        capture_interval_seconds=0,
        capture_mode="periodic",
    )
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("FAKE_", "AGENTIHOOKS_"))}
    environ["PATH"] = f"{BIN}{os.pathsep}{environ.get('PATH', '')}"
    return Boot(settings, environ=environ)


def test_launch_2_a_colon_slash_task_id_boots_fresh_without_capture(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """LAUNCH-2: the launch is accepted, the worktree is one escaped folder, no capture is attempted."""
    b = boot(tmp_path)
    ctx = b.prepare()
    assert ctx.launch.authority.task_id == TASK
    assert ctx.layout.worktree.name == "github.com%2Facme%2Fapp%3Aissue%2F42"
    assert ctx.layout.worktree.is_dir() and ctx.restored.outcome.recovery.value == "fresh"
    assert b.capture_hook is None
    lines = [json.loads(x) for x in capsys.readouterr().err.splitlines() if x.startswith("{")]
    assert {
        "event": "capture_unavailable",
        "execution_id": ctx.launch.authority.execution_id,
        "reason": "task_id",
    } in (lines)
    assert not any((tmp_path / "store").rglob("*.json"))


def test_launch_2_a_checkpoint_directive_for_such_a_task_is_refused_not_crashed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """LAUNCH-2: no checkpoint can belong to such a task id, so a restore of one is scope_mismatch."""
    b = boot(
        tmp_path,
        restore={"checkpoint_id": "ckpt-1", "recovery": "reconstructed", "watermark": 3},
        restore_from={"execution_id": "exe-" + "2" * 32, "execution_generation": 1},
    )
    assert b.run() == EXIT_REFUSED
    [line] = [json.loads(x) for x in capsys.readouterr().err.splitlines() if '"restore_refused"' in x]
    assert line["reason"] == "scope_mismatch"
