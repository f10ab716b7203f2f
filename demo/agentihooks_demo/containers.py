"""The processes of one simulated container, found and stopped the way a container runtime would.

A real container's processes all die with its cgroup. Here each worker and
everything it starts (the supervisor puts the harness in a process group of
its own) carries the container's name in an environment variable, so the
simulated kubelet can find them all in ``/proc`` — also after the worker died
and its children were re-parented — and an OOM kill takes every one of them.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

CONTAINER_ENV = "AGENTIHOOKS_DEMO_CONTAINER"


def container_pids(name: str) -> list[int]:
    """Processes of one simulated container: they carry its name in their environment (Linux /proc)."""
    marker = f"{CONTAINER_ENV}={name}".encode()
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                out.append(int(entry.name))
        except OSError:
            continue
    return out


def kill_container(name: str, wait: float = 5.0) -> None:
    """SIGKILL every process of the container and wait (briefly) until none is left."""
    deadline = time.monotonic() + wait
    while True:
        pids = container_pids(name)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if not pids or time.monotonic() > deadline:
            return
        time.sleep(0.05)


def reap(name: str, grace: float = 5.0) -> None:
    """Give what the worker left a moment to exit after its own SIGTERM handling, then SIGKILL it."""
    deadline = time.monotonic() + grace
    while container_pids(name) and time.monotonic() < deadline:
        time.sleep(0.1)
    kill_container(name)


def secret_value(secret: dict[str, Any], key: str) -> str:
    if key in (secret.get("stringData") or {}):
        return str(secret["stringData"][key])
    return base64.b64decode(secret["data"][key]).decode()


def env_for_workers(path_prefix: Path, attempts: Path, remotes: dict[str, str]) -> dict[str, str]:
    """What every simulated container gets: the fake harness first on PATH, attempts under the node dir."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTIHOOKS_", "FAKE_"))}
    return {
        **keep,
        "PATH": f"{path_prefix}{os.pathsep}{os.environ.get('PATH', '')}",
        "AGENTIHOOKS_ATTEMPTS_DIR": str(attempts),
        "AGENTIHOOKS_PROJECT_REMOTES": json.dumps(remotes),
        "AGENTIHOOKS_CAPTURE_INTERVAL_SECONDS": "1",
        "FAKE_HARNESS_RUN_SECONDS": "forever",
        "GIT_AUTHOR_NAME": "demo",
        "GIT_AUTHOR_EMAIL": "demo@localhost",
        "GIT_COMMITTER_NAME": "demo",
        "GIT_COMMITTER_EMAIL": "demo@localhost",
    }
