"""``checkpoint_remote: true`` against the real control API: restore, outcome, captures and heartbeats.

The controller (real aiohttp app, real Redis, real local store) fences an
attempt and accepts a resume decision; the replacement boots from the launch
record the controller would write, reads its checkpoint through the scoped
routes with its own worker credential, reports its outcome, writes its own
captures through the controller, and never hands its credential to the agent.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_worker.boot import Boot
from agentihooks_worker.errors import EXIT_REFUSED
from agentihooks_worker.settings import WorkerSettings
from testsupport.control_api import World, make_world
from testsupport.fake_harness import BIN
from testsupport.worker_boot import remote_launch

from .conftest import events, harness_runs

SCOPE = StoreScope(swarm="swarm-a", task_id="task-1", task_generation=1, namespace="default")
PROJECT = "github.com/example/app"


def replacement_boot(w: World, tmp_path: Path, *, token: str | None = None) -> tuple[Boot, str, Any]:
    eid = w.fail()
    built = w.checkpoint(eid, kind="claude", harness_version="2.1.332", project_id=PROJECT)
    decision = w.recoveries["swarm-a"].decide(eid, "resume", "operator", spec=w.specs["swarm-a"])
    assert decision.replacement and decision.directive and decision.directive.recovery.value == "native"
    plan = w.launcher.pods[decision.replacement]
    launch = remote_launch(plan, w.url, PROJECT)
    (tmp_path / "launch.json").write_text(json.dumps(launch))
    settings = WorkerSettings(
        attempts_dir=tmp_path / "attempts",
        launch_record=tmp_path / "launch.json",
        project_remotes={PROJECT: str(built.worktree)},
        capture_interval_seconds=0,
        capture_mode="periodic",
    )
    environ = {
        "PATH": f"{BIN}:/usr/local/bin:/usr/bin:/bin",
        "FAKE_HARNESS_LOG": str(tmp_path / "harness.log"),
        "AGENTIHOOKS_WORKER_TOKEN": w.worker_token(plan.execution_id) if token is None else token,
    }
    return Boot(settings, environ=environ), plan.execution_id, built


def test_remote_restore_reports_its_outcome_and_captures_through_the_controller(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTIHOOKS_CHECKPOINT_REMOTE", "false")  # undone after the test
    (tmp_path / "world").mkdir()
    with make_world(redis_url, tmp_path / "world") as w:
        boot, new, built = replacement_boot(w, tmp_path)
        ctx = boot.prepare()
        assert ctx.restored.outcome.recovery.value == "native"
        assert os.environ["AGENTIHOOKS_CHECKPOINT_REMOTE"] == "true"  # set by the worker for itself
        recovery = w.recoveries["swarm-a"]
        assert recovery.restore_outcomes_by_type["native"] == 1  # the controller stored the outcome
        stored = json.loads(w.client.hget(recovery.keys.restore_outcomes, new))
        assert stored["checkpoint_id"] == built.checkpoint_id
        mine = w.store.list_checkpoints(SCOPE, execution_id=new)
        assert len(mine) == 1 and mine[0].complete and mine[0].execution_generation == 2
        first_beat = json.loads(w.client.hget(recovery.keys.heartbeats, new))  # reported by the first capture
        assert (first_beat["session_id"], first_beat["archive_watermark"]) == (
            built.session_id,
            built.watermark,
        )
        assert boot.supervise(ctx) == 0
        beat = json.loads(w.client.hget(recovery.keys.heartbeats, new))
        assert beat["archive_watermark"] == built.watermark + 1
        assert beat["session_id"] == built.session_id
        assert len(w.store.list_checkpoints(SCOPE, execution_id=new)) == 2
        run = harness_runs(tmp_path)[-1]
        assert run["argv"] == ["-p", "--resume", built.session_id]
        assert run["saw_worker_token"] is False
        err = capsys.readouterr().err
        assert len(events(err, "restore_verified")) == 1
        assert w.worker_token(new) not in err


def test_remote_restore_without_a_valid_credential_starts_nothing(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "world").mkdir()
    with make_world(redis_url, tmp_path / "world") as w:
        boot, new, _ = replacement_boot(w, tmp_path, token="not-the-credential")
        assert boot.run() == EXIT_REFUSED
        assert harness_runs(tmp_path) == []
        assert w.client.hget(w.recoveries["swarm-a"].keys.restore_outcomes, new) is None
        err = capsys.readouterr().err
        assert len(events(err, "restore_refused")) == 1 and events(err, "restore_verified") == []
        assert "not-the-credential" not in err
        assert events(err, "restore_refused")[0]["reason"] == "forbidden_scope"


def test_the_worker_trades_its_pods_credential_before_anything_else(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``credential_exchange`` in its launch record the worker's first call trades the Pod's
    credential: the restore, its outcome, its captures and its reports all go with the new one, and
    the Pod's credential (what every other process of the container holds) is refused afterwards."""
    monkeypatch.setenv("AGENTIHOOKS_CHECKPOINT_REMOTE", "false")
    (tmp_path / "world").mkdir()
    with make_world(redis_url, tmp_path / "world") as w:
        boot, new, _ = replacement_boot(w, tmp_path)
        launch = json.loads((tmp_path / "launch.json").read_text())
        launch["credential_exchange"] = True
        (tmp_path / "launch.json").write_text(json.dumps(launch))
        pods = w.worker_token(new)
        assert boot.run() == 0
        recovery = w.recoveries["swarm-a"]
        assert recovery.restore_outcomes_by_type["native"] == 1  # reported with the new credential
        assert len(w.store.list_checkpoints(SCOPE, execution_id=new)) == 2  # captured with it too
        lease = w.call("POST", f"/v1/executions/{new}/lease", pods, json={})
        assert lease.status_code == 401  # the Pod's credential matches nothing any more
        assert harness_runs(tmp_path)[-1]["saw_worker_token"] is False
        assert pods not in capsys.readouterr().err
