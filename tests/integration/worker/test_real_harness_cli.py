"""Our version parsing and resume arguments against the real Claude Code and Codex CLIs from npm.

The pinned packages come from :mod:`testsupport.real_clis` (installed once into
``AGENTIHOOKS_NPM_CACHE``, default ``~/.cache/agentihooks-npm``, and by
``scripts/install-deps.sh``); the tests are skipped only where npm itself is
missing, and fail there under ``CI=true``. The resume commands are run for
real in ``test_real_cli_resume.py``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from agentihooks_worker.harness import ClaudeCode, Codex
from testsupport import real_clis

PINNED = real_clis.PINNED
SID = "0f9e3a52-7c1d-4a8e-9b61-2d5c8e4f7a10"


@pytest.fixture(scope="module")
def npm_bin() -> Path:
    return real_clis.require(PINNED)


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
    argv = claude.resume_command(
        [exe, "--dangerously-skip-permissions", "-p", "--output-format", "stream-json", "task"], SID
    )
    assert argv == [
        exe,
        "--dangerously-skip-permissions",
        "-p",
        "--output-format",
        "stream-json",
        "--resume",
        SID,
    ]
    for flag in ("--resume", "--dangerously-skip-permissions", "--print", "--output-format", "stream-json"):
        assert flag in help_text, flag
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
