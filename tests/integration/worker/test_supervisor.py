"""The supervisor against the fake harness in real processes: exit codes, signals, captures, progress."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from testsupport.fake_harness import CLAUDE

TESTS = Path(__file__).resolve().parents[2]


def start(tmp_path: Path, *, interval: float = 0, fail: bool = False, **env: str) -> subprocess.Popen[bytes]:
    (tmp_path / "wt").mkdir(exist_ok=True)
    args = [str(tmp_path / "journal"), str(tmp_path / "home"), str(tmp_path / "wt"), str(interval)]
    if fail:
        args.append("fail")
    full_env = dict(os.environ, PYTHONPATH=str(TESTS), FAKE_HARNESS_READY=str(tmp_path / "ready"), **env)
    return subprocess.Popen(
        [sys.executable, "-m", "testsupport.fake_harness.supervise", *args, "--", str(CLAUDE), "-p", "task"],
        env=full_env,
        cwd=tmp_path,
    )


def journal(tmp_path: Path) -> list[str]:
    path = tmp_path / "journal"
    return path.read_text().splitlines() if path.exists() else []


def wait_for(predicate: object, timeout: float = 60) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.05)


@pytest.mark.parametrize("code", [0, 3])
def test_exit_code_propagates_and_final_capture_runs(tmp_path: Path, code: int) -> None:
    proc = start(tmp_path, FAKE_HARNESS_EXIT=str(code), FAKE_HARNESS_RECORDS="2")
    assert proc.wait(timeout=60) == code
    lines = journal(tmp_path)
    assert lines[-2].startswith("capture final ") and lines[-2].endswith(" 3")  # prompt + 2 records
    assert lines[-1].startswith("progress ") and lines[-1].endswith(" 3 final")  # the final capture's


@pytest.mark.parametrize(("term_exit", "expected"), [(None, 143), ("0", 0), ("9", 9)])
def test_sigterm_is_forwarded_final_capture_taken_and_code_propagates(
    tmp_path: Path, term_exit: str | None, expected: int
) -> None:
    env = {"FAKE_HARNESS_RUN_SECONDS": "forever"}
    if term_exit is not None:
        env["FAKE_HARNESS_TERM_EXIT"] = term_exit
    proc = start(tmp_path, **env)
    wait_for((tmp_path / "ready").exists)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == expected
    finals = [ln for ln in journal(tmp_path) if ln.startswith("capture final")]
    assert len(finals) == 1
    assert finals[0].endswith(" 3")  # the harness's "stopped" record was captured too
    assert journal(tmp_path)[-1].endswith(" 3 final")  # and reported as final, before the exit


def test_sigint_is_forwarded(tmp_path: Path) -> None:
    proc = start(tmp_path, FAKE_HARNESS_RUN_SECONDS="forever")
    wait_for((tmp_path / "ready").exists)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    assert any(ln.startswith("capture final") for ln in journal(tmp_path))


def test_periodic_captures_report_progress_once_per_change(tmp_path: Path) -> None:
    proc = start(tmp_path, interval=0.05, FAKE_HARNESS_RUN_SECONDS="forever")
    wait_for(lambda: sum(ln.startswith("capture periodic") for ln in journal(tmp_path)) >= 3)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 143
    lines = journal(tmp_path)
    progress = [ln for ln in lines if ln.startswith("progress")]
    assert len(progress) == len(set(progress))  # only changes are reported
    assert progress[0].endswith(" 2")
    assert progress[-1].endswith(" 3 final")  # the final capture's, even if its watermark was reported


def test_failed_final_capture_after_clean_exit_is_75(tmp_path: Path) -> None:
    proc = start(tmp_path, fail=True)
    assert proc.wait(timeout=60) == 75
    assert journal(tmp_path) == ["capture-failed final"]


def test_failed_capture_keeps_harness_failure_code(tmp_path: Path) -> None:
    proc = start(tmp_path, fail=True, FAKE_HARNESS_EXIT="4")
    assert proc.wait(timeout=60) == 4


def test_harness_that_cannot_start_is_70(tmp_path: Path) -> None:
    (tmp_path / "wt").mkdir()
    env = dict(os.environ, PYTHONPATH=str(TESTS))
    args = [str(tmp_path / "journal"), str(tmp_path / "home"), str(tmp_path / "wt"), "0"]
    cmd = [sys.executable, "-m", "testsupport.fake_harness.supervise", *args, "--", str(tmp_path / "nope")]
    assert subprocess.run(cmd, env=env, check=False).returncode == 70


def test_harness_outliving_its_kill_budget_is_killed(tmp_path: Path) -> None:
    proc = start(
        tmp_path,
        FAKE_HARNESS_RUN_SECONDS="forever",
        FAKE_HARNESS_IGNORE_TERM="1",
        SUPERVISE_KILL_SECONDS="0.3",
    )
    wait_for((tmp_path / "ready").exists)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGKILL
    assert any(ln.startswith("capture final") for ln in journal(tmp_path))
