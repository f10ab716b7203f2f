"""Replacements ride out a controller restart: no seat loses its continuity.

The control API runs as a process of its own (real Recovery, real Redis, real
local store; :mod:`testsupport.control_api_process`). Three seats fail with a
native checkpoint each and are resumed natively; three real ``agentihooks-worker
boot`` processes restore through the controller's scoped routes. The control
API SIGKILLs itself in the middle of streaming a checkpoint object to them (or,
in the second test, when the first outcome arrives), and comes back on the same
port 10 seconds later. Every worker keeps retrying, completes its restore,
reports the outcome the directive asked for, and only then starts its harness.
With nobody answering at all, a worker refuses ``store_unreachable`` (never
``manifest_absent``) once its retry deadline passed.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores.local import LocalStore
from agentihooks_operator.recovery import LaunchPlan, Recovery
from agentihooks_operator.swarm import SwarmSpec
from testsupport.checkpoints import build_checkpoint
from testsupport.recovery import MemoryLauncher, observe, swarm_doc
from testsupport.worker_boot import start_boot

from .conftest import events, harness_runs

TESTS = Path(__file__).resolve().parents[2]
PROJECT = "github.com/example/app"
RESTART_AFTER_S = 10.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Fleet:
    """Three seats whose replacements were admitted natively, and the world around them."""

    tmp: Path
    redis_url: str
    client: redis.Redis
    doc: dict[str, Any]
    store_root: Path
    plans: list[LaunchPlan]
    worktrees: dict[str, Path]
    port: int
    token: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
def fleet(redis_url: str, tmp_path: Path) -> Iterator[Fleet]:
    client = redis.Redis.from_url(redis_url)
    root = tmp_path / "store"
    root.mkdir()
    store = LocalStore(root)
    doc = swarm_doc(3)
    spec = SwarmSpec.model_validate(doc)
    launcher = MemoryLauncher()
    r = Recovery(client, "swarm-a", holder="ctl-a", catalog=store, launcher=launcher)
    firsts = r.ensure_seats(spec)
    worktrees: dict[str, Path] = {}
    for n, plan in enumerate(firsts):
        session = f"sess-{n + 1}-{secrets.token_hex(4)}"
        built = build_checkpoint(
            store,
            StoreScope(swarm="swarm-a", task_id=plan.task_id, task_generation=1),
            tmp_path / f"fenced-{n}",
            kind="claude",
            checkpoint_id=f"ckpt-{n + 1}",
            execution_id=plan.execution_id,
            session_id=session,
            compatibility_key="v1",
            harness_version="2.1.332",
            project_id=PROJECT,
            records=6 + n,
        )
        r.report_session(plan.execution_id, session)
        r.report_watermark(plan.execution_id, built.watermark)
        worktrees[plan.task_id] = built.worktree
    report = r.reconcile(
        spec,
        observe(
            [(p.execution_id, p.seat, 1) for p in firsts],
            failed={p.execution_id: "oom_killed" for p in firsts},
        ),
    )
    assert len(report.launches) == 3  # resumed natively without asking
    plans = [launcher.pods[eid] for eid in report.launches]
    assert all(p.directive is not None and p.directive.recovery.value == "native" for p in plans)
    yield Fleet(
        tmp_path, redis_url, client, doc, root, plans, worktrees, free_port(), "op-" + secrets.token_hex(8)
    )
    client.close()


@contextmanager
def control_api(fleet: Fleet, kill_at: str = "") -> Iterator[subprocess.Popen[bytes]]:
    """The control API process on the fleet's port until the block ends (or it kills itself)."""
    cfg = {
        "redis_url": fleet.redis_url,
        "port": fleet.port,
        "store_root": str(fleet.store_root),
        "operator_token": fleet.token,
        "holder": "ctl-a",
        "swarms": {"swarm-a": fleet.doc},
        "kill_at": kill_at,
    }
    env = {
        **os.environ,
        "CONTROL_API_CONFIG": json.dumps(cfg),
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    log = (fleet.tmp / "control-api.log").open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "testsupport.control_api_process"], env=env, stdout=log, stderr=log
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (fleet.tmp / "control-api.log").read_text()[-3000:]
            try:
                if httpx.get(fleet.url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the control API did not start"
            time.sleep(0.1)
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(20)
        log.close()


def start_worker(fleet: Fleet, plan: LaunchPlan, **env: str) -> subprocess.Popen[str]:
    assert plan.directive is not None and plan.restore_from is not None
    return start_boot(
        plan,
        fleet.tmp / plan.execution_id,
        control_url=fleet.url,
        project=PROJECT,
        worktree=fleet.worktrees[plan.task_id],
        **env,
    )


def stored_outcome(fleet: Fleet, execution_id: str) -> dict[str, Any] | None:
    from agentihooks_operator.recovery.store.keys import SwarmKeys

    raw = fleet.client.hget(SwarmKeys("agentihooks", "swarm-a").restore_outcomes, execution_id)
    return json.loads(raw) if raw else None


def finish(workers: dict[str, subprocess.Popen[str]]) -> dict[str, tuple[int, str]]:
    out = {}
    for eid, proc in workers.items():
        _, err = proc.communicate(timeout=240)
        out[eid] = (proc.returncode, err)
    return out


def wait_dead(proc: subprocess.Popen[bytes], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        assert time.monotonic() < deadline, "the control API never reached its kill point"
        time.sleep(0.05)


def retry_notices(err: str) -> list[str]:
    return [line for line in err.splitlines() if "retrying" in line and "controller" in line]


def assert_same_continuity(fleet: Fleet, results: dict[str, tuple[int, str]]) -> None:
    for plan in fleet.plans:
        code, err = results[plan.execution_id]
        assert code == 0, err[-3000:]
        assert events(err, "restore_refused") == [], err[-3000:]
        [verified] = events(err, "restore_verified")
        assert plan.directive is not None
        assert verified["recovery"] == "native"
        assert verified["checkpoint_id"] == plan.directive.checkpoint_id
        assert verified["watermark"] == plan.directive.watermark
        stored = stored_outcome(fleet, plan.execution_id)
        assert stored is not None and stored["status"] == "verified"
        assert (stored["recovery"], stored["checkpoint_id"], stored["session_id"], stored["watermark"]) == (
            "native",
            plan.directive.checkpoint_id,
            plan.directive.session_id,
            plan.directive.watermark,
        )
        [run] = harness_runs(fleet.tmp / plan.execution_id)
        assert run["argv"][-2:] == ["--resume", plan.directive.session_id]


def test_a_controller_killed_mid_download_and_back_10_s_later_loses_no_seat(fleet: Fleet) -> None:
    with control_api(fleet, kill_at="object:1") as dying:
        workers = {p.execution_id: start_worker(fleet, p) for p in fleet.plans}
        wait_dead(dying)  # killed while streaming a checkpoint object to a restoring worker
    assert "SIGKILL" in (fleet.tmp / "control-api.log").read_text()
    killed_at = time.monotonic()
    time.sleep(RESTART_AFTER_S)
    assert all(w.poll() is None for w in workers.values()), "a worker gave up while the controller was away"
    with control_api(fleet):
        results = finish(workers)
    assert time.monotonic() - killed_at >= RESTART_AFTER_S
    assert_same_continuity(fleet, results)
    for _, err in results.values():  # said it was retrying, and when it got through; never a URL a call
        assert "/v1/executions/" not in err and "HTTP Request" not in err, err[-3000:]
        assert 1 <= len(retry_notices(err)) <= 3, err[-3000:]
        assert "the controller answered again after" in err, err[-3000:]


def test_the_harness_starts_only_after_the_outcome_is_recorded(fleet: Fleet) -> None:
    with control_api(fleet, kill_at="outcome") as dying:
        workers = {p.execution_id: start_worker(fleet, p) for p in fleet.plans}
        wait_dead(dying)  # killed when the first outcome arrived, before storing it
    time.sleep(RESTART_AFTER_S)
    for plan in fleet.plans:
        assert stored_outcome(fleet, plan.execution_id) is None
        assert harness_runs(fleet.tmp / plan.execution_id) == []  # nobody started unrecorded
    with control_api(fleet):
        results = finish(workers)
    assert_same_continuity(fleet, results)


def test_a_controller_that_never_comes_back_is_store_unreachable(fleet: Fleet) -> None:
    plan = fleet.plans[0]
    worker = start_worker(fleet, plan, AGENTIHOOKS_CONTROL_RETRY_SECONDS="3")  # nobody listens
    _, err = worker.communicate(timeout=120)
    assert worker.returncode == 64, err
    [refused] = events(err, "restore_refused")
    assert refused["reason"] == "store_unreachable"
    assert harness_runs(fleet.tmp / plan.execution_id) == []
    # every call of those 3 s (the restore's reads, the refusal report) retried: one line says so
    assert retry_notices(err) == [
        "WARNING agentihooks_checkpoint.stores.remote: the controller cannot be reached (ConnectError); "
        "retrying for up to 3 s"
    ], err[-3000:]
    assert "/v1/executions/" not in err and "HTTP Request" not in err, err[-3000:]


class _Printed:
    """The events a CLI printed (``-o json``: one per line), read by a thread of its own."""

    def __init__(self, stream: Any) -> None:
        self.ids: list[str] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            if line.strip():
                with self._lock:
                    self.ids.append(json.loads(line)["id"])

    def wait_for(self, ids: list[str], timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if set(ids) <= set(self.ids):
                    return
                seen = list(self.ids)
            assert time.monotonic() < deadline, f"printed {seen}, waiting for {ids}"
            time.sleep(0.05)


def test_events_follow_reconnects_across_a_restart_and_prints_each_event_once(fleet: Fleet) -> None:
    """``agentihooks swarm NAME events --follow`` while the controller is SIGKILLed and comes back:
    the CLI reconnects with the last event id it printed, prints none twice and skips none."""
    store = LocalStore(fleet.store_root)
    spec = SwarmSpec.model_validate(fleet.doc)
    backlog = Recovery(fleet.client, "swarm-a", holder="ctl-a", catalog=store, launcher=MemoryLauncher())
    before = [e.id for e in backlog.events(1000)]
    assert before
    env = {
        **os.environ,
        "AGENTIHOOKS_CONTROL_URL": fleet.url,
        "AGENTIHOOKS_TOKEN": fleet.token,
        "HOME": str(fleet.tmp),  # no kubeconfig: the swarm is named alone
        "KUBECONFIG": "",
    }
    argv = [str(Path(sys.executable).parent / "agentihooks"), "swarm", "swarm-a", "events", "--follow"]
    cli = subprocess.Popen(
        [*argv, "--count", "1000", "-o", "json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    printed = _Printed(cli.stdout)
    try:
        with control_api(fleet) as first:
            printed.wait_for(before)
            first.kill()  # as a node loss would: the stream breaks mid-way
            first.wait(10)
        time.sleep(1.0)  # nobody answers for a while: the CLI keeps trying
        with control_api(fleet):
            r = Recovery(fleet.client, "swarm-a", holder="ctl-a", catalog=store, launcher=MemoryLauncher())
            assert r.acquire()
            lost = fleet.plans[0]
            r.reconcile(
                spec, observe([(lost.execution_id, lost.seat, 2)], failed={lost.execution_id: "oom_killed"})
            )
            every = [e.id for e in r.events(1000)]
            assert len(every) > len(before), "the second failure wrote events"
            printed.wait_for(every)
    finally:
        cli.terminate()
        cli.wait(20)
        err = cli.stderr.read() if cli.stderr else ""
    assert printed.ids == every  # each once, in order, none skipped
    assert "the event stream broke" in err and "reconnecting" in err
    assert "Traceback" not in err
