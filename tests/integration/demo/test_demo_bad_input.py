"""What the demo needs is checked before it starts anything; a missing piece is named, nothing runs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .conftest import REPO, demo_argv, demo_env, processes_using


def run_with(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The demo with ``env`` added to its environment (it is expected to stop before starting anything)."""
    return subprocess.run(
        demo_argv(*args), cwd=REPO, env={**demo_env(), **env}, capture_output=True, text=True, timeout=60
    )


def test_missing_fake_harness_is_named_and_nothing_starts(tmp_path: Path) -> None:
    work = tmp_path / "work"
    env = {"AGENTIHOOKS_DEMO_HARNESS_BIN": str(tmp_path / "no-such-bin")}
    done = run_with(env, "--ci", "--workdir", str(work))
    assert done.returncode == 1
    assert f"fake harness executables not found in {tmp_path / 'no-such-bin'}" in done.stdout
    assert not (work / "redis").exists() and not (work / "logs").exists()
    assert processes_using(work) == []


def test_missing_product_commands_are_named(tmp_path: Path) -> None:
    work = tmp_path / "work"
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("redis-server", "git"):  # only the product's own commands are missing
        found = subprocess.run(["which", tool], capture_output=True, text=True, check=True).stdout.strip()
        os.symlink(found, bare / tool)
    env = {**demo_env(), "PATH": str(bare)}
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "agentihooks_demo.main", "--workdir", str(work)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "not found on PATH: agentihooks, agentihooks-operator, agentihooks-worker" in done.stdout
    assert not (work / "logs").exists()


def test_control_plane_without_helm_is_named_and_nothing_starts(tmp_path: Path) -> None:
    """``--control-plane`` renders the chart's RBAC with the pinned helm; without it, nothing runs."""
    work = tmp_path / "work"
    done = run_with(
        {"AGENTIHOOKS_TOOLS_DIR": str(tmp_path / "no-tools")},
        "--control-plane",
        "--ci",
        "--workdir",
        str(work),
    )
    assert done.returncode == 1
    assert f"helm not found at {tmp_path / 'no-tools' / 'bin' / 'helm'}" in done.stdout
    assert "run `make install`" in done.stdout
    assert not (work / "logs").exists() and not (work / "control-plane").exists()
    assert processes_using(work) == []
