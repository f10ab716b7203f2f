"""Gate of the kind end-to-end tests: they run only where a Docker engine and kind are available.

The machines this project is developed and tested on have no Docker engine, so here every test of
this folder is skipped with the reason. On a laptop with Docker and kind they create the cluster with
deploy/kind/up.sh (once per session) and run each check of deploy/kind/check.sh. Set
AGENTIHOOKS_E2E=0 to skip them even there; AGENTIHOOKS_KEEP_CLUSTER=1 keeps the cluster afterwards.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KIND = ROOT / "deploy" / "kind"


def why_not_runnable() -> str | None:
    """The reason the kind checks cannot run here, or ``None`` when they can."""
    if os.environ.get("AGENTIHOOKS_E2E") == "0":
        return "AGENTIHOOKS_E2E=0: kind end-to-end checks switched off"
    if shutil.which("docker") is None:
        return "no docker on PATH: the kind end-to-end checks need a Docker engine"
    info = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=30)
    if info.returncode != 0:
        return "no Docker engine answers (docker info failed): the kind end-to-end checks are skipped"
    for tool in ("kind", "kubectl", "helm", "openssl"):
        if shutil.which(tool) is None and not (tool in ("kubectl", "helm") and _pinned(tool)):
            return f"no {tool} on PATH: the kind end-to-end checks need kind, kubectl, helm and openssl"
    return None


def _pinned(tool: str) -> bool:
    base = os.environ.get("AGENTIHOOKS_TOOLS_DIR") or str(Path.home() / ".cache" / "agentihooks-tools")
    return (Path(base) / "bin" / tool).is_file()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    mine = [item for item in items if Path(str(item.fspath)).is_relative_to(here)]
    if not mine:
        return
    reason = why_not_runnable()
    for item in mine:
        item.add_marker(pytest.mark.e2e)
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def kind_cluster() -> Iterator[Path]:
    """The cluster from deploy/kind/up.sh; deleted at the end unless AGENTIHOOKS_KEEP_CLUSTER=1."""
    subprocess.run([str(KIND / "up.sh")], check=True, timeout=1800)
    yield KIND
    if os.environ.get("AGENTIHOOKS_KEEP_CLUSTER") != "1":
        subprocess.run([str(KIND / "down.sh")], check=False, timeout=600)
