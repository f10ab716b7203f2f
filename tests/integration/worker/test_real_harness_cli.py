"""Our version parsing and resume arguments against the real Claude Code and Codex CLIs from npm.

The packages are installed once into a cache folder outside the repository
(``AGENTIHOOKS_NPM_CACHE``, default ``~/.cache/agentihooks-npm``) and reused;
the test is skipped, saying why, only when npm or its registry is unreachable.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from agentihooks_worker.harness import ClaudeCode, Codex

PINNED = {"@anthropic-ai/claude-code": "2.1.332", "@openai/codex": "0.162.1"}
SID = "0f9e3a52-7c1d-4a8e-9b61-2d5c8e4f7a10"


def _installed(cache: Path, package: str) -> str | None:
    manifest = cache / "node_modules" / package / "package.json"
    try:
        version = json.loads(manifest.read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None
    return version if isinstance(version, str) else None


@pytest.fixture(scope="module")
def npm_bin() -> Path:
    cache = Path(os.environ.get("AGENTIHOOKS_NPM_CACHE", Path.home() / ".cache" / "agentihooks-npm"))
    missing = [f"{p}@{v}" for p, v in PINNED.items() if _installed(cache, p) != v]
    if missing:
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("npm is not installed on this machine, so the real harness CLIs cannot be fetched")
        cache.mkdir(parents=True, exist_ok=True)
        try:
            done = subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--prefix", str(cache), *missing],
                capture_output=True,
                text=True,
                timeout=600,
            )
        except subprocess.TimeoutExpired:
            pytest.skip("npm install of the real harness CLIs timed out: the npm registry is unreachable")
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            if any(
                w in " ".join(tail)
                for w in ("ENOTFOUND", "ECONNREFUSED", "ETIMEDOUT", "EAI_AGAIN", "network")
            ):
                pytest.skip(f"the npm registry is unreachable: {' '.join(tail)}")
            pytest.fail(f"npm install failed: {' '.join(tail)}")
    return cache / "node_modules" / ".bin"


def run(argv: list[str], tmp_path: Path) -> str:
    env = dict(os.environ, HOME=str(tmp_path), CLAUDE_CONFIG_DIR=str(tmp_path / ".claude"))
    env["CODEX_HOME"] = str(tmp_path / ".codex")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-500:]
    return done.stdout


def test_claude_version_and_resume_arguments(npm_bin: Path, tmp_path: Path) -> None:
    claude = ClaudeCode()
    exe = str(npm_bin / "claude")
    version = claude.installed_version(exe, dict(os.environ, HOME=str(tmp_path)))
    assert str(version) == PINNED["@anthropic-ai/claude-code"]
    assert claude.is_qualified(version)
    help_text = run([exe, "--help"], tmp_path)
    argv = claude.resume_command([exe, "--dangerously-skip-permissions", "-p", "task"], SID)
    assert argv == [exe, "--dangerously-skip-permissions", "--resume", SID]
    assert "--resume" in help_text and "--dangerously-skip-permissions" in help_text
    assert "--continue" in help_text and "--continue" not in argv


def test_codex_version_and_resume_arguments(npm_bin: Path, tmp_path: Path) -> None:
    codex = Codex()
    exe = str(npm_bin / "codex")
    version = codex.installed_version(exe, dict(os.environ, HOME=str(tmp_path)))
    assert str(version) == PINNED["@openai/codex"]
    assert codex.is_qualified(version)
    argv = codex.resume_command([exe, "--dangerously-bypass-approvals-and-sandbox", "task"], SID)
    assert argv == [exe, "resume", "--dangerously-bypass-approvals-and-sandbox", SID]
    resume_help = run([exe, "resume", "--help"], tmp_path)
    assert "[SESSION_ID]" in resume_help and "--last" in resume_help
    assert "--dangerously-bypass-approvals-and-sandbox" in resume_help
    exec_argv = codex.resume_command([exe, "exec", "task"], SID)
    assert exec_argv == [exe, "exec", "resume", SID]
    assert "[SESSION_ID]" in run([exe, "exec", "resume", "--help"], tmp_path)
