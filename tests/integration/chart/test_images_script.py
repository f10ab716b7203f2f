"""scripts/images.sh names the step that failed, and caches nothing of a failed build.

A copy of the build's inputs is made in a temp folder (the script works from the folder it sits
in), with a Dockerfile one of whose steps fails; the script is run with its own empty image cache.
The local Debian base it builds on is the one ``make images`` made (buildah's store), so only the
broken step runs. Without buildah the script says which tool is missing and what installs it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from testsupport.helm import ROOT

pytestmark = pytest.mark.slow
INPUTS = [
    "pyproject.toml",
    "README.md",
    "LICENSE",
    "requirements.lock",
    "operator",
    "worker",
    "deploy",
    "scripts",
]
BROKEN = "RUN echo agentihooks-broken-step && exit 7"


def _copy(dest: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    dest.mkdir()
    for name in INPUTS:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        else:
            shutil.copy2(src, dest / name)
    (dest / "charts" / "agentihooks-recovery").mkdir(parents=True)
    shutil.copy2(
        ROOT / "charts" / "agentihooks-recovery" / "Chart.yaml", dest / "charts" / "agentihooks-recovery"
    )
    return dest


def _run(repo: Path, cache: Path, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENTIHOOKS_IMAGE_CACHE": str(cache)}
    if path is not None:
        env["PATH"] = path
    return subprocess.run(
        ["bash", str(repo / "scripts" / "images.sh")], capture_output=True, text=True, env=env, timeout=900
    )


def test_a_failing_dockerfile_step_is_named_with_its_log_and_nothing_is_cached(tmp_path: Path) -> None:
    if shutil.which("buildah") is None or shutil.which("mmdebstrap") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("buildah and mmdebstrap are missing (scripts/install-deps.sh installs them)")
        pytest.skip("buildah or mmdebstrap missing")
    repo = _copy(tmp_path / "repo")
    dockerfile = repo / "deploy" / "Dockerfile.operator"
    lines = dockerfile.read_text().splitlines()
    first_from = next(i for i, ln in enumerate(lines) if ln.startswith("FROM "))
    dockerfile.write_text("\n".join([*lines[: first_from + 1], BROKEN, *lines[first_from + 1 :]]) + "\n")
    cache = tmp_path / "cache"
    done = _run(repo, cache)
    assert done.returncode != 0, done.stdout
    message = done.stderr.strip().splitlines()[-1]
    assert message.startswith("images: step 'operator image (deploy/Dockerfile.operator)' failed: "), message
    assert BROKEN.removeprefix("RUN ") in message, message  # the Dockerfile step itself
    log = Path(message.rsplit("its log: ", 1)[1])
    assert "agentihooks-broken-step" in log.read_text()
    assert done.stdout == ""  # no image printed
    assert not list(cache.glob("*.tar")) and not list(cache.glob("*.part"))


def test_a_missing_build_tool_is_named_with_what_installs_it(tmp_path: Path) -> None:
    tools = tmp_path / "bin"  # this machine's commands, without buildah
    tools.mkdir()
    for folder in ("/usr/local/bin", "/usr/bin"):
        for cmd in Path(folder).iterdir():
            if cmd.name != "buildah" and not (tools / cmd.name).exists():
                (tools / cmd.name).symlink_to(cmd)
    done = _run(_copy(tmp_path / "repo"), tmp_path / "cache", path=str(tools))
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == (
        "images: step 'tools' failed: buildah is missing (scripts/install-deps.sh installs it)"
    ), done.stderr
