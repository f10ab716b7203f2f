"""deploy/Dockerfile.worker's steps, run outside Docker: the CLIs it installs are the ones the worker accepts.

No Docker engine runs here, so the steps that matter are run in a throwaway
folder instead of an image:

* the final stage's ``npm install -g`` line, with the Dockerfile's ``ARG``
  defaults and ``ENV`` settings, into a temporary global prefix
  (``--prefix``; the image's is ``/usr/local``), followed by the Dockerfile's
  own ``claude --version | grep -F ...`` and ``codex --version | grep -F ...``
  checks, verbatim, with that prefix first on ``PATH``. Only ``npm cache clean
  --force`` is left out: in the image it shrinks the layer, here it would empty
  this machine's npm cache;
* then the worker's harness adapters ask each installed CLI for its version,
  as a replacement does before a native resume, and find it qualified and equal
  to the pin (which is also the version the real-CLI tests run).

The product half of the image (the wheel stage and its ``pip install``) is
built and run from the installed wheel in tests/integration/chart/test_image_wheel.py.

The node here is the machine's (the image copies ``node:22`` in); both CLIs
install and run with it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from agentihooks_worker.harness import harness_for
from testsupport import real_clis
from testsupport.helm import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

DOCKERFILE = ROOT / "deploy" / "Dockerfile.worker"


def final_stage() -> list[str]:
    """The final stage's instructions (continuation lines joined, comments dropped)."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    stages: list[list[str]] = [[]]
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append([])
        stages[-1].append(line)
    return stages[-1]


def build_args() -> dict[str, str]:
    return dict(re.findall(r"^ARG (\w+)=(\S+)$", DOCKERFILE.read_text(), flags=re.M))


def env_settings() -> dict[str, str]:
    """The final stage's ``ENV`` settings (``KEY=value`` pairs)."""
    found: dict[str, str] = {}
    for line in final_stage():
        if line.startswith("ENV "):
            found.update(re.findall(r"(\w+)=(\S+)", line[4:]))
    return found


def npm_steps() -> list[str]:
    """The ``&&``-joined commands of the final stage's RUN that installs the CLIs, from ``npm install`` on."""
    [run] = [line for line in final_stage() if line.startswith("RUN ") and "npm install -g" in line]
    steps = [s.strip() for s in run[4:].split("&&")]
    first = next(i for i, s in enumerate(steps) if s.startswith("npm install -g"))
    return steps[first:]


@pytest.fixture
def image_prefix(tmp_path: Path) -> Path:
    if shutil.which("npm") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("npm is missing (CI=true: scripts/install-deps.sh must provide it)")
        pytest.skip("npm is not installed on this machine, so the image's npm steps cannot run")
    return tmp_path / "usr-local"


def test_the_dockerfile_pins_the_clis_the_tests_run() -> None:
    args = build_args()
    pins = {
        real_clis.CLAUDE_PACKAGE: args["CLAUDE_CODE_VERSION"],
        real_clis.CODEX_PACKAGE: args["CODEX_VERSION"],
    }
    assert pins == real_clis.PINNED


def test_the_images_npm_steps_install_the_qualified_clis(image_prefix: Path, tmp_path: Path) -> None:
    steps = npm_steps()
    assert steps[0].startswith("npm install -g ") and "npm cache clean --force" in steps
    assert [s for s in steps if "--version" in s] == [
        'claude --version | grep -F "${CLAUDE_CODE_VERSION}"',
        'codex --version | grep -F "${CODEX_VERSION}"',
    ]
    script = " && ".join(
        "true"  # npm cache clean --force: would empty this machine's npm cache
        if s == "npm cache clean --force"
        else s.replace("npm install -g ", f'npm install -g --prefix "{image_prefix}" ', 1)
        for s in steps
    )
    node = shutil.which("node")
    assert node is not None
    env = {
        **os.environ,  # npm's own settings (registry, certificates, cache) are this machine's
        **build_args(),
        **env_settings(),
        "PATH": os.pathsep.join([str(image_prefix / "bin"), str(Path(node).parent), "/usr/bin", "/bin"]),
    }
    try:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            env=env,
            capture_output=True,
            text=True,
            timeout=1200,
        )
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        # what the image's `claude --version | grep` and `codex --version | grep` steps matched
        assert done.stdout.splitlines()[-2:] == ["2.1.332 (Claude Code)", "codex-cli 0.162.1"]
        for package, version in real_clis.PINNED.items():
            manifest = image_prefix / "lib" / "node_modules" / package / "package.json"
            assert json.loads(manifest.read_text())["version"] == version
        worker_accepts_the_installed_clis(image_prefix / "bin", tmp_path)
    finally:
        shutil.rmtree(image_prefix, ignore_errors=True)  # some 800 MB


def worker_accepts_the_installed_clis(bin_dir: Path, tmp_path: Path) -> None:
    """The worker's adapters ask each installed CLI for its version, as a replacement does before a native
    resume, and find it qualified and equal to the pin."""
    node = shutil.which("node")
    assert node is not None
    env = {"PATH": os.pathsep.join([str(bin_dir), str(Path(node).parent), "/usr/bin", "/bin"])}
    env["HOME"] = str(tmp_path / "home")
    for name in ("claude", "codex"):
        adapter = harness_for(name)
        version = adapter.installed_version(str(bin_dir / adapter.executable), env)
        assert str(version) == real_clis.PINNED[real_clis.PACKAGE_OF[name]]
        assert adapter.is_qualified(version)
