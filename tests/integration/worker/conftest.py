"""A replacement attempt's world: a real checkpoint of a fenced attempt, a launch record, settings.

``scenario(kind, directive=...)`` captures a real checkpoint (real git repo,
real native files) with the checkpoint fixture factory into a local store or
moto S3, and writes the launch record of the next attempt of the same seat.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores import LocalStore, S3Store
from agentihooks_checkpoint.stores.base import CheckpointStore
from agentihooks_worker.attempt import AttemptLayout
from agentihooks_worker.boot import Boot
from agentihooks_worker.settings import WorkerSettings
from testsupport.checkpoints import BuiltCheckpoint, Kind, build_checkpoint
from testsupport.fake_harness import BIN, CLAUDE, CODEX

SCOPE = StoreScope(swarm="example", task_id="task-1", task_generation=1)
NEW_EXECUTION = "exe-new"
VERSIONS = {"claude": "2.1.332", "codex": "0.162.1", "context": None}


@dataclass
class Scenario:
    tmp: Path
    store: CheckpointStore
    built: BuiltCheckpoint
    settings: WorkerSettings
    environ: dict[str, str]
    launch: dict[str, Any] = field(default_factory=dict)

    @property
    def layout(self) -> AttemptLayout:
        harness = self.launch["harness"]
        return AttemptLayout(self.settings.attempts_dir, NEW_EXECUTION, harness, SCOPE.task_id)

    def write_launch(self) -> None:
        self.settings.launch_record.write_text(json.dumps(self.launch))

    def boot(self, **kw: Any) -> Boot:
        self.write_launch()
        return Boot(self.settings, environ=self.environ, **kw)

    def cli_env(self) -> dict[str, str]:
        self.write_launch()
        env = dict(self.environ)
        s = self.settings
        env["AGENTIHOOKS_ATTEMPTS_DIR"] = str(s.attempts_dir)
        env["AGENTIHOOKS_LAUNCH_RECORD"] = str(s.launch_record)
        env["AGENTIHOOKS_PROJECT_REMOTES"] = json.dumps(s.project_remotes)
        env["AGENTIHOOKS_CAPTURE_INTERVAL_SECONDS"] = str(s.capture_interval_seconds)
        env["AGENTIHOOKS_CAPTURE_MODE"] = s.capture_mode
        for name in ("checkpoint_root", "checkpoint_bucket", "checkpoint_endpoint"):
            value = getattr(s, name)
            if value:
                env[f"AGENTIHOOKS_{name.upper()}"] = value
        return env


def directive_for(built: BuiltCheckpoint, recovery: str) -> dict[str, Any]:
    if recovery == "fresh":
        return {"recovery": "fresh"}
    d: dict[str, Any] = {
        "checkpoint_id": built.checkpoint_id,
        "recovery": recovery,
        "watermark": built.watermark,
    }
    if recovery == "native":
        d["session_id"] = built.session_id
    return d


ScenarioFactory = Callable[..., Scenario]


@pytest.fixture
def scenario(tmp_path: Path, request: pytest.FixtureRequest) -> ScenarioFactory:
    def make(
        kind: Kind = "claude",
        recovery: str = "native",
        *,
        s3: bool = False,
        harness_version: str | None = None,
        **build: Any,
    ) -> Scenario:
        if s3:
            endpoint = request.getfixturevalue("s3_endpoint")
            bucket = request.getfixturevalue("s3_bucket")
            client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
            store: CheckpointStore = S3Store(bucket, client)
            settings = WorkerSettings(checkpoint_bucket=bucket, checkpoint_endpoint=endpoint)
        else:
            store = LocalStore(tmp_path / "store")
            settings = WorkerSettings(checkpoint_root=str(tmp_path / "store"))
        version = harness_version or VERSIONS[kind]
        built = build_checkpoint(
            store,
            SCOPE,
            tmp_path / "fenced",
            kind=kind,
            checkpoint_id="ckpt-7",
            sequence=7,
            execution_id="exe-old",
            harness_version=version,
            **build,
        )
        settings = settings.model_copy(
            update={
                "attempts_dir": tmp_path / "attempts",
                "launch_record": tmp_path / "launch.json",
                "project_remotes": {"local:fixture": str(built.worktree)},
                "capture_interval_seconds": 0,
                "capture_mode": "periodic",
            }
        )
        harness = "codex" if kind == "codex" else "claude"
        agent = [str(CODEX), "exec", "carry on"] if harness == "codex" else [str(CLAUDE), "-p", "carry on"]
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("FAKE_", "AGENTIHOOKS_"))}
        environ["PATH"] = f"{BIN}{os.pathsep}{environ.get('PATH', '')}"
        environ["FAKE_HARNESS_LOG"] = str(tmp_path / "harness.log")
        launch = {
            "schema_version": 1,
            "authority": {
                "execution_id": NEW_EXECUTION,
                "generation": 2,
                "task_id": SCOPE.task_id,
                "seat_id": "eng-2",
                "swarm_id": SCOPE.swarm,
                "grant_id": "grant-2",
            },
            "harness": harness,
            "agent": agent,
            "kill_seconds": 5,
            "registration": {
                "projects": ["local:fixture"],
                "task_generation": 1,
                "compatibility_key": built.compatibility_key,
            },
            "restore_from": {"execution_id": "exe-old", "execution_generation": 1},
            "restore": directive_for(built, recovery),
        }
        return Scenario(tmp_path, store, built, settings, environ, launch)

    return make


def harness_runs(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "harness.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def tree_snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every file and folder under ``root`` (``.git`` included) with its mode and bytes."""
    out: dict[str, tuple[int, bytes]] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        st = path.lstat()
        out[rel] = (st.st_mode, path.read_bytes() if path.is_file() and not path.is_symlink() else b"")
    return out


def events(text: str, name: str) -> list[dict[str, Any]]:
    found = []
    for line in text.splitlines():
        if line.startswith("{"):
            obj = json.loads(line)
            if obj.get("event") == name:
                found.append(obj)
    return found
