"""The README's set-up works where the system Python refuses pip installs (stock Debian 12, PEP 668).

A fresh clone of the committed tree in a temp folder runs the README's main
command, ``make demo`` (here with ``DEMO_ARGS=--ci`` so every outcome is
checked), with ``PIP_REQUIRE_VIRTUALENV=1``: pip refuses every install outside
a virtualenv, as Debian's externally managed interpreter does. The PATH is
the machine's, without this test run's own virtualenv. The clone must build
its own ``.venv`` and run everything from it. The README's test command is
checked by its plan (``make -n test``): running the whole suite inside the
suite is what CI does anyway.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _system_env() -> dict[str, str]:
    """This machine's environment without any virtualenv of this run, pip refusing system installs."""
    venv_bins = {str(Path(sys.prefix) / "bin"), str(ROOT / ".venv" / "bin")}
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p not in venv_bins]
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "AGENTIHOOKS_VENV", "PYTHONPATH"}}
    env["PATH"] = os.pathsep.join(path)
    env["PIP_REQUIRE_VIRTUALENV"] = "1"
    env.pop("MAKEFLAGS", None)
    env.pop("MAKELEVEL", None)
    return env


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("git") is None or shutil.which("make") is None:
        pytest.skip("git and make are needed to clone and run the README's commands")
    target = tmp_path_factory.mktemp("readme") / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(target)], check=True, timeout=120)
    return target


@pytest.mark.slow
def test_system_python_refuses_pip_but_make_demo_works(clone: Path) -> None:
    env = _system_env()
    python3 = shutil.which("python3", path=env["PATH"])
    assert python3 is not None
    refused = subprocess.run(
        [python3, "-m", "pip", "install", "--dry-run", "--no-deps", "six"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode != 0, "this check needs a pip that refuses installs outside a virtualenv"

    done = subprocess.run(
        ["make", "demo", "DEMO_ARGS=--ci"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "every outcome of the story checked" in done.stdout
    assert (clone / ".venv" / "bin" / "python").exists(), "the clone made its own virtualenv"
    assert (clone / ".venv" / "bin" / "agentihooks").exists()


def test_make_test_runs_everything_from_the_project_virtualenv(clone: Path) -> None:
    plan = subprocess.run(
        ["make", "-n", "test"], cwd=clone, env=_system_env(), capture_output=True, text=True, timeout=60
    )
    assert plan.returncode == 0, plan.stderr
    lines = plan.stdout.splitlines()
    assert "./scripts/install-deps.sh" in lines
    for step in ("-m ruff check .", "-m mypy", "-m pytest"):
        assert any(line.startswith(".venv/bin/python " + step) for line in lines), (step, lines)
    assert ".venv/bin/lint-imports --config pyproject.toml" in lines
