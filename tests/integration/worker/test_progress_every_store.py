"""Every worker reports its session and archive watermark, whatever its checkpoint store.

Native resume needs the fence to know the session the lost attempt held and how far its
transcript was archived. Only ``checkpoint_remote`` workers used to report that, so with a bucket or
a root (the default set-ups) the fence recorded no session: native resume was never offered, the
whole tail was called lost, and the replacement's outcome was never recorded. Here, for a bucket
(moto), a root folder and the remote store: a first attempt runs as a real ``agentihooks-worker boot``
process with the fake harness writing records, captures, reports; it is SIGKILLed; the controller
(real Recovery, real control API, real Redis) fences it with the reported session and watermark,
names the tail after that watermark, resumes it natively without a decision, and the replacement
(again a real process) restores natively and has its outcome recorded.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from agentihooks_checkpoint.stores.base import CheckpointStore
from agentihooks_checkpoint.stores.local import LocalStore
from agentihooks_checkpoint.stores.s3 import S3Store
from testsupport.control_api import World, make_world
from testsupport.processes import kill_tree
from testsupport.recovery import observe
from testsupport.worker_boot import start_boot

from .conftest import events, harness_runs

PROJECT = "github.com/example/app"
STORES = ("bucket", "root", "remote")


def git_project(path: Path) -> Path:
    path.mkdir()
    run = lambda *a: subprocess.run(["git", *a], cwd=path, check=True, capture_output=True)  # noqa: E731
    run("init", "-q", "-b", "main")
    (path / "README.md").write_text("app\n")
    run("add", "README.md")
    run("-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "first")
    return path


@contextmanager
def world_of(
    kind: str, redis_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[World, dict[str, str]]]:
    """The world with the controller's store of ``kind`` and the worker environment that reaches it."""
    (tmp_path / "world").mkdir()
    store: CheckpointStore
    env: dict[str, str] = {}
    if kind == "bucket":
        import boto3

        endpoint = request.getfixturevalue("s3_endpoint")
        bucket = request.getfixturevalue("s3_bucket")
        store = S3Store(bucket, boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1"))
        env = {"AGENTIHOOKS_CHECKPOINT_BUCKET": bucket, "AGENTIHOOKS_CHECKPOINT_ENDPOINT": endpoint}
        env |= {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
    else:
        root = tmp_path / "world" / "store"
        root.mkdir()
        store = LocalStore(root)
        if kind == "root":
            env = {"AGENTIHOOKS_CHECKPOINT_ROOT": str(root)}
    with make_world(redis_url, tmp_path / "world", store=store, progress=False) as w:
        yield w, env


def beat(w: World, execution_id: str) -> dict[str, Any]:
    raw = w.client.hget(w.recoveries["swarm-a"].keys.heartbeats, execution_id)
    return json.loads(raw) if raw else {}


def wait_for(check: Any, what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return value


@pytest.mark.parametrize("kind", STORES)
def test_a_killed_worker_of_any_store_is_resumed_natively_with_its_tail_named(
    kind: str, redis_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    project = git_project(tmp_path / "project")
    with world_of(kind, redis_url, tmp_path, request) as (w, store_env):
        first = w.first["swarm-a"]

        def boot(plan: Any, folder: str, **env: str) -> subprocess.Popen[str]:
            """The worker Pod of ``plan``, reaching the store of ``kind``."""
            return start_boot(
                plan,
                tmp_path / folder,
                control_url=w.url,
                project=PROJECT,
                worktree=project,
                remote=kind == "remote",
                **store_env,
                **env,
            )

        worker = boot(
            first,
            "first",
            FAKE_HARNESS_RUN_SECONDS="forever",
            FAKE_HARNESS_TICK="0.2",
            AGENTIHOOKS_CAPTURE_INTERVAL_SECONDS="0.5",
        )
        try:
            progressed = wait_for(
                lambda: (
                    (b := beat(w, first.execution_id)).get("session_id")
                    and (b.get("archive_watermark") or 0) >= 3
                    and b
                ),
                "the first attempt's session and watermark reported",
            )
        finally:
            kill_tree(worker.pid)  # the OOM killer, the whole Pod: no final capture, no last report
            _, err = worker.communicate(timeout=30)
        assert "/v1/executions/" not in err and first.worker_token.get_secret_value() not in err
        reported = beat(w, first.execution_id)
        assert reported["session_id"] == progressed["session_id"]
        session, watermark = reported["session_id"], reported["archive_watermark"]
        assert watermark >= progressed["archive_watermark"]

        recovery, spec = w.recoveries["swarm-a"], w.specs["swarm-a"]
        report = recovery.reconcile(
            spec, observe([(first.execution_id, "eng-1", 1)], failed={first.execution_id: "oom_killed"})
        )
        assert report.fenced == [first.execution_id]
        fence = json.loads(w.client.hget(recovery.keys.attempt_fences, first.execution_id))
        assert (fence["native_session"], fence["archive_watermark"]) == (session, watermark)
        assert fence["tail"] == (
            f"Transcript written after record {watermark} was not archived and is lost; "
            "its length is unknown."
        )
        [decision] = report.decisions  # nobody asked: the automation took the native resume
        assert decision.replacement is not None and decision.directive is not None
        assert decision.directive.recovery.value == "native"
        assert (decision.directive.session_id, decision.directive.watermark) == (session, watermark)

        plan = w.launcher.pods[decision.replacement]
        second = boot(plan, "second")
        _, err = second.communicate(timeout=120)
        assert second.returncode == 0, err[-3000:]
        [verified] = events(err, "restore_verified")
        assert (verified["recovery"], verified["watermark"]) == ("native", watermark)
        [run] = harness_runs(tmp_path / "second")
        assert run["argv"][-2:] == ["--resume", session]
        stored = json.loads(w.client.hget(recovery.keys.restore_outcomes, plan.execution_id))
        assert (stored["status"], stored["recovery"], stored["session_id"]) == ("verified", "native", session)
        assert stored["archive_watermark"] == watermark
