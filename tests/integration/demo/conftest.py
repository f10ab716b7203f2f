"""Runs ``agentihooks-demo`` as a process (the way ``make demo`` does) and finds what it left behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def demo_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "agentihooks_demo.main", *args]


def demo_env() -> dict[str, str]:
    """The test's environment without the product's settings; the npm cache of the real CLIs stays."""
    return {
        k: v
        for k, v in os.environ.items()
        if k == "AGENTIHOOKS_NPM_CACHE" or not k.startswith(("AGENTIHOOKS_", "FAKE_", "KUBECONFIG"))
    }


def requires_control_plane() -> None:
    """``--control-plane`` and ``--evidence`` need the control-plane binaries and the pinned helm: skip
    (fail under CI) naming what is missing, as the other real-control-plane tests do."""
    from testsupport.controlplane import find_binaries
    from testsupport.helm import find_tool

    find_binaries()
    find_tool("helm")


def run_demo(*args: str, timeout: float = 170) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        demo_argv(*args),
        cwd=REPO,
        env=demo_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def processes_using(folder: Path) -> list[str]:
    """Command lines of live processes whose environment or argv names ``folder`` (left-overs)."""
    needle = str(folder).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            stat = (entry / "stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] == "Z":
                continue  # a zombie holds no resources; its parent reaps it
            env = (entry / "environ").read_bytes()
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if needle in env or needle in cmd:
            found.append(cmd.replace(b"\0", b" ").decode(errors="replace"))
    return found
