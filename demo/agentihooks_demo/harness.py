"""Where the fake ``claude``/``codex`` executables come from (they stand in for the real CLIs).

The fakes have the real CLIs' surface (``--version``, ``--resume``, ``exec
resume``, the session files they write) and live with the tests in a source
checkout; ``AGENTIHOOKS_DEMO_HARNESS_BIN`` points elsewhere.
"""

from __future__ import annotations

import os
from pathlib import Path

from .stack import StackError

CHECKOUT_BIN = Path(__file__).resolve().parents[2] / "tests" / "testsupport" / "fake_harness" / "bin"


def fake_harness_bin() -> Path:
    configured = os.environ.get("AGENTIHOOKS_DEMO_HARNESS_BIN")
    path = Path(configured) if configured else CHECKOUT_BIN
    if not (path / "claude").exists() or not (path / "codex").exists():
        raise StackError(
            f"fake harness executables not found in {path}: run the demo from a source checkout "
            "or set AGENTIHOOKS_DEMO_HARNESS_BIN"
        )
    return path


def harness_versions(bin_dir: Path) -> dict[str, str]:
    """``--version`` of each fake, as the worker sees it."""
    import subprocess

    out = {}
    for name in ("claude", "codex"):
        done = subprocess.run([str(bin_dir / name), "--version"], capture_output=True, text=True, check=False)
        out[name] = done.stdout.strip()
    return out
