"""The layout promises of DESIGN.md: ``operator/`` is a source root, never a package."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_stdlib_operator_module_is_not_shadowed() -> None:
    import operator

    assert operator.add(2, 3) == 5
    assert not (ROOT / "operator" / "__init__.py").exists()
    assert Path(operator.__file__ or "").parent != ROOT / "operator"


def test_stdlib_operator_in_a_fresh_interpreter_from_repo_root() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "import operator, agentihooks_operator; print(operator.__file__)"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert not out.startswith(str(ROOT / "operator"))


def test_packages_import() -> None:
    for name in ("agentihooks_operator", "agentihooks_worker", "agentihooks_checkpoint"):
        assert importlib.import_module(name).__doc__


def test_operator_and_worker_never_import_each_other() -> None:
    out = subprocess.run(
        ["lint-imports", "--config", str(ROOT / "pyproject.toml")], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr
