"""A boot that crashes around each writing step and runs again does nothing twice; SIGTERM end to end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from agentihooks_checkpoint.validator import Validator
from agentihooks_worker.harness.claude import encode_cwd
from agentihooks_worker.restorer import Restorer

from .conftest import NEW_EXECUTION, SCOPE, Scenario, ScenarioFactory, events, harness_runs
from .test_boot_restore import assert_source_restored


class Crash(BaseException):
    """Stands for the process dying at a step (not caught by ``except Exception``)."""


def crash_at(step: str) -> Restorer:
    def on_step(name: str) -> None:
        if name == step:
            raise Crash(step)

    return Restorer(on_step=on_step)


@pytest.mark.parametrize(
    ("recovery", "step"),
    [
        ("native", "verified"),
        ("native", "native"),
        ("native", "source"),
        ("native", "restored"),
        ("native", "logged"),
        ("native", "initial_capture"),
        ("reconstructed", "source"),
        ("reconstructed", "continuation"),
    ],
)
def test_crash_then_boot_again_does_nothing_twice(
    scenario: ScenarioFactory, capsys: pytest.CaptureFixture[str], recovery: str, step: str
) -> None:
    sc = scenario("claude", recovery)
    with pytest.raises(Crash):
        sc.boot(restorer=crash_at(step)).prepare()
    ctx = sc.boot().prepare()
    layout, built = sc.layout, sc.built
    assert_source_restored(layout.worktree, built)  # the patch applied exactly once
    assert len(events(capsys.readouterr().err, "restore_verified")) == 1
    mine = sc.store.list_checkpoints(SCOPE, execution_id=NEW_EXECUTION)
    assert len(mine) == 1
    if recovery == "native":
        restored = (
            layout.claude_config_dir / "projects" / encode_cwd(layout.worktree) / f"{built.session_id}.jsonl"
        )
        assert restored.read_bytes() == built.transcript.read_bytes()
        assert ctx.restored.argv[-2:] == ["--resume", built.session_id]
    else:
        assert ctx.restored.stdin == layout.continuation
        assert layout.continuation.read_bytes().endswith(built.transcript.read_bytes())


def start_cli(sc: Scenario, **env: str) -> subprocess.Popen[str]:
    full = sc.cli_env()
    full.update({"FAKE_HARNESS_RUN_SECONDS": "forever", "FAKE_HARNESS_READY": str(sc.tmp / "ready"), **env})
    cmd = [sys.executable, "-c", "from agentihooks_worker.cli import main; main()", "boot"]
    return subprocess.Popen(cmd, env=full, stderr=subprocess.PIPE, text=True)


def wait_for(predicate: object, proc: subprocess.Popen[str]) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + 120
    while not predicate():
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)


@pytest.mark.parametrize(("term_exit", "expected"), [(None, 143), ("0", 0)])
def test_sigterm_commits_a_final_capture_and_propagates_the_exit_code(
    scenario: ScenarioFactory, term_exit: str | None, expected: int
) -> None:
    sc = scenario("claude", "native")
    proc = start_cli(sc, **({"FAKE_HARNESS_TERM_EXIT": term_exit} if term_exit else {}))
    wait_for((sc.tmp / "ready").exists, proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == expected
    assert len(events(err, "restore_verified")) == 1
    finals = [e for e in events(err, "checkpoint_committed") if e["when"] == "final"]
    assert len(finals) == 1
    final = finals[0]
    assert final["watermark"] == sc.built.watermark + 2  # the resumed turn and the harness's stop record
    verdict = Validator().verify(
        sc.store, SCOPE, final["checkpoint_id"], execution_id=NEW_EXECUTION, execution_generation=2
    )
    assert verdict.ok and verdict.record is not None and verdict.record.native
    assert events(err, "harness_exited")[0]["exit_code"] == expected
    assert harness_runs(sc.tmp)[-1]["argv"] == ["-p", "--resume", sc.built.session_id]


def test_periodic_captures_while_the_harness_runs(scenario: ScenarioFactory) -> None:
    sc = scenario("claude", "native")
    sc.settings = sc.settings.model_copy(update={"capture_interval_seconds": 0.1})
    proc = start_cli(sc, FAKE_HARNESS_TICK="0.05")  # the conversation keeps growing

    def periodic_taken() -> bool:
        return len(sc.store.list_checkpoints(SCOPE, execution_id=NEW_EXECUTION)) >= 3

    wait_for(periodic_taken, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130
    whens = [e["when"] for e in events(err, "checkpoint_committed")]
    assert whens[0] == "initial" and whens[-1] == "final" and "periodic" in whens
    sequences = [s.checkpoint_sequence for s in sc.store.list_checkpoints(SCOPE, execution_id=NEW_EXECUTION)]
    assert len(set(sequences)) == len(sequences) == len(whens)


def test_refused_boot_exits_64_from_the_command_line(scenario: ScenarioFactory, tmp_path: Path) -> None:
    sc = scenario("claude", "native")
    sc.environ["FAKE_CLAUDE_VERSION"] = "2.2.0 (Claude Code)"
    proc = start_cli(sc)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 64
    assert [e["reason"] for e in events(err, "restore_refused")] == ["unqualified_version"]


def test_boot_killed_while_the_harness_runs_then_booted_again(scenario: ScenarioFactory) -> None:
    sc = scenario("claude", "native")
    first = start_cli(sc)
    wait_for((sc.tmp / "ready").exists, first)
    harness_pid = int((sc.tmp / "ready").read_text())
    first.kill()  # the worker dies without a final capture; its orphaned harness is killed too
    os.kill(harness_pid, signal.SIGKILL)
    _, first_err = first.communicate(timeout=120)
    (sc.tmp / "ready").unlink()
    assert len(events(first_err, "restore_verified")) == 1
    second = start_cli(sc, FAKE_HARNESS_RUN_SECONDS="0")
    _, second_err = second.communicate(timeout=120)
    assert second.returncode == 0
    assert events(second_err, "restore_verified") == []  # logged once per attempt
    whens = [e["when"] for e in events(first_err + second_err, "checkpoint_committed")]
    assert whens == ["initial", "final"]  # the first capture was not taken again
    runs = harness_runs(sc.tmp)
    assert [r["argv"] for r in runs] == [["-p", "--resume", sc.built.session_id]] * 2
    assert len(sc.store.list_checkpoints(SCOPE, execution_id=NEW_EXECUTION)) == 2
