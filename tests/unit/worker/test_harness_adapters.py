"""Harness adapters: versions and qualification, resume argv, homes, session discovery, restore paths."""

from __future__ import annotations

import json
import os
from pathlib import Path, PurePosixPath

import pytest
from agentihooks_worker.errors import HarnessError
from agentihooks_worker.harness import ClaudeCode, Codex, HarnessVersion, harness_for
from agentihooks_worker.harness.claude import encode_cwd
from agentihooks_worker.harness.codex import read_session_meta, session_id_of

SID = "0f9e3a52-7c1d-4a8e-9b61-2d5c8e4f7a10"


@pytest.mark.parametrize(
    ("text", "expected", "qualified"),
    [
        ("2.1.332 (Claude Code)\n", HarnessVersion(2, 1, 332), True),
        ("2.1.0 (Claude Code)", HarnessVersion(2, 1, 0), True),
        ("2.2.1 (Claude Code)", HarnessVersion(2, 2, 1), False),
        ("1.0.119 (Claude Code)", HarnessVersion(1, 0, 119), False),
    ],
)
def test_claude_version(text: str, expected: HarnessVersion, qualified: bool) -> None:
    v = ClaudeCode().parse_version(text)
    assert v == expected
    assert ClaudeCode().is_qualified(v) is qualified


@pytest.mark.parametrize(
    ("text", "expected", "qualified"),
    [
        ("codex-cli 0.162.1\n", HarnessVersion(0, 162, 1), True),
        ("codex-cli 0.162.0", HarnessVersion(0, 162, 0), True),
        ("codex-cli 0.171.0", HarnessVersion(0, 171, 0), False),
        ("codex-cli 0.161.9", HarnessVersion(0, 161, 9), False),
    ],
)
def test_codex_version(text: str, expected: HarnessVersion, qualified: bool) -> None:
    v = Codex().parse_version(text)
    assert v == expected
    assert Codex().is_qualified(v) is qualified


@pytest.mark.parametrize("text", ["", "claude 2.1.3", "2.1 (Claude Code)", "codex-cli 0.162.1"])
def test_claude_rejects_other_output(text: str) -> None:
    with pytest.raises(HarnessError, match="unrecognised claude --version"):
        ClaudeCode().parse_version(text)


@pytest.mark.parametrize("text", ["", "2.1.332 (Claude Code)", "codex 0.162.1", "codex-cli v"])
def test_codex_rejects_other_output(text: str) -> None:
    with pytest.raises(HarnessError, match="unrecognised codex --version"):
        Codex().parse_version(text)


def test_resume_commands_never_use_continue_or_last() -> None:
    claude = ClaudeCode().resume_command(["/usr/bin/claude", "--dangerously-skip-permissions", "fix it"], SID)
    assert claude == ["/usr/bin/claude", "--dangerously-skip-permissions", "--resume", SID]
    assert ClaudeCode().resume_command(["claude", "-c"], SID) == ["claude", "--resume", SID]
    assert Codex().resume_command(["codex", "do it"], SID) == ["codex", "resume", SID]
    assert Codex().resume_command(["codex", "exec", "do it"], SID) == ["codex", "exec", "resume", SID]
    kept = Codex().resume_command(["codex", "--dangerously-bypass-approvals-and-sandbox", "x"], SID)
    assert kept == ["codex", "resume", "--dangerously-bypass-approvals-and-sandbox", SID]


def test_claude_resume_keeps_print_mode_and_its_output_format() -> None:
    """Whoever reads the worker's output reads the resumed run in the format the launch asked for."""
    agent = ["claude", "-p", "--verbose", "--output-format", "stream-json", "--model=opus", "Work on it"]
    assert ClaudeCode().resume_command(agent, SID) == [
        "claude", "-p", "--verbose", "--output-format", "stream-json", "--model=opus", "--resume", SID,
    ]  # fmt: skip
    # a valued flag left without its value at the end is dropped, not given the session id
    assert ClaudeCode().resume_command(["claude", "--print", "--model"], SID) == [
        "claude",
        "--print",
        "--resume",
        SID,
    ]


@pytest.mark.parametrize("bad", ["../x", "a/b", "-rf", ""])
def test_resume_refuses_path_like_session_ids(bad: str) -> None:
    with pytest.raises(HarnessError):
        ClaudeCode().resume_command(["claude"], bad)
    with pytest.raises(HarnessError):
        Codex().resume_command(["codex"], bad)


def test_homes_follow_env_then_home() -> None:
    assert ClaudeCode().home({"CLAUDE_CONFIG_DIR": "/x/c", "HOME": "/h"}) == Path("/x/c")
    assert ClaudeCode().home({"HOME": "/h"}) == Path("/h/.claude")
    assert Codex().home({"CODEX_HOME": "/x/k", "HOME": "/h"}) == Path("/x/k")
    assert Codex().home({"HOME": "/h"}) == Path("/h/.codex")
    with pytest.raises(HarnessError, match="CODEX_HOME nor HOME"):
        Codex().home({})


def test_encode_cwd_replaces_everything_outside_alnum() -> None:
    assert (
        encode_cwd("/home/worker/attempts/exe-1/worktrees/t_1.x")
        == "-home-worker-attempts-exe-1-worktrees-t-1-x"
    )


def test_claude_discovery_and_restore_target(tmp_path: Path) -> None:
    home, cwd = tmp_path / "claude", Path("/w/old")
    project = home / "projects" / encode_cwd(cwd)
    (project / SID / "subagents").mkdir(parents=True)
    (project / f"{SID}.jsonl").write_bytes(b"{}\n")
    (project / SID / "subagents" / "a.jsonl").write_bytes(b"{}\n")
    (project / "other.jsonl").write_bytes(b"{}\n")
    os.utime(project / "other.jsonl", ns=(1, 1))
    found = ClaudeCode().find_session(home, SID, cwd)
    assert found is not None
    assert found.transcript == PurePosixPath("projects", encode_cwd(cwd), f"{SID}.jsonl")
    assert PurePosixPath("projects", encode_cwd(cwd), SID, "subagents", "a.jsonl") in found.files
    assert ClaudeCode().find_session(home, SID) == found
    assert ClaudeCode().find_session(home, SID, Path("/elsewhere")) is None
    newest = ClaudeCode().newest_session(home, cwd)
    assert newest is not None and newest.session_id == SID
    new_cwd = Path("/w/new")
    target = ClaudeCode().restore_target(found.transcript, new_cwd)
    assert target == PurePosixPath("projects", encode_cwd(new_cwd), f"{SID}.jsonl")
    assert ClaudeCode().restore_target(PurePosixPath("settings.json"), new_cwd) is None
    assert ClaudeCode().restore_target(PurePosixPath("projects/../../x/y"), new_cwd) is None


def test_codex_discovery_restores_sessions_only(tmp_path: Path) -> None:
    home = tmp_path / "codex"
    day = home / "sessions" / "2026" / "11" / "30"
    day.mkdir(parents=True)
    rollout = day / f"rollout-2026-11-30T08-00-00-{SID}.jsonl"
    meta = {"type": "session_meta", "payload": {"id": SID, "cwd": "/w", "cli_version": "0.162.1"}}
    rollout.write_bytes(json.dumps(meta).encode() + b"\n")
    assert session_id_of(rollout) == SID
    assert read_session_meta(rollout)["cli_version"] == "0.162.1"
    found = Codex().find_session(home, SID)
    assert found is not None and found.files == (PurePosixPath(rollout.relative_to(home).as_posix()),)
    newest = Codex().newest_session(home, Path("/w"))
    assert newest is not None and newest.session_id == SID
    assert Codex().newest_session(home, Path("/other")) is None
    assert Codex().restore_target(found.transcript, Path("/new")) == found.transcript
    assert Codex().restore_target(PurePosixPath("state_5.sqlite"), Path("/new")) is None
    assert Codex().restore_target(PurePosixPath("sessions/x.sqlite"), Path("/new")) is None


def test_codex_meta_must_be_first(tmp_path: Path) -> None:
    rollout = tmp_path / f"rollout-x-{SID}.jsonl"
    rollout.write_bytes(b'{"type": "response_item"}\n')
    with pytest.raises(HarnessError, match="session_meta"):
        read_session_meta(rollout)


def test_harness_for() -> None:
    assert harness_for("claude").name == "claude"
    with pytest.raises(ValueError, match="unknown harness 'gemini'"):
        harness_for("gemini")
