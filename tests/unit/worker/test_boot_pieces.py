"""Pure boot steps: attempt layout, onboarding, continuation file, transcript splitting, store choice."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from agentihooks_checkpoint.reasons import NO_STORE_MESSAGE
from agentihooks_worker.attempt import SUBDIRS, AttemptLayout
from agentihooks_worker.continuation import OPENING_LINE, prompt_delivery, write_continuation
from agentihooks_worker.errors import Refused, StoreSelectionError
from agentihooks_worker.harness import harness_for
from agentihooks_worker.onboarding import OnboardingError, mark_onboarded
from agentihooks_worker.settings import WorkerSettings
from agentihooks_worker.store_select import StoreChoice, choose_store, require_store
from agentihooks_worker.transcripts import count_records, split_records

SEPARATORS = "a\u2028b\u2029c".encode()


def test_attempt_layout(tmp_path: Path) -> None:
    layout = AttemptLayout(tmp_path, "exe-1", "claude", "task-9")
    layout.create()
    for name in SUBDIRS:
        assert (layout.root / name).is_dir()
    assert stat.S_IMODE(layout.root.stat().st_mode) == 0o700
    env = layout.environment({"PATH": "/bin"})
    assert env["HOME"] == str(tmp_path / "exe-1" / "homes" / "claude")
    assert env["CLAUDE_CONFIG_DIR"] == str(layout.home / ".claude")
    assert env["CODEX_HOME"] == str(layout.home / ".codex")
    assert layout.worktree == tmp_path / "exe-1" / "worktrees" / "task-9"
    assert layout.continuation == tmp_path / "exe-1" / "continuation.txt"
    with pytest.raises(ValueError, match="safe path segment"):
        _ = AttemptLayout(tmp_path, "../x", "claude", "t").root


def test_onboarding_creates_file(tmp_path: Path) -> None:
    cfg = tmp_path / ".claude" / ".claude.json"
    mark_onboarded(cfg, tmp_path / "wt")
    data = json.loads(cfg.read_text())
    assert data == {
        "hasCompletedOnboarding": True,
        "projects": {str(tmp_path / "wt"): {"hasTrustDialogAccepted": True}},
    }
    assert stat.S_IMODE(cfg.stat().st_mode) == 0o600


def test_onboarding_merges_and_keeps_everything(tmp_path: Path) -> None:
    cfg = tmp_path / ".claude.json"
    before = {
        "userID": "u",
        "hasCompletedOnboarding": False,
        "projects": {"/other": {"allowedTools": ["x"]}, str(tmp_path): {"history": [1]}},
    }
    cfg.write_text(json.dumps(before))
    cfg.chmod(0o640)
    mark_onboarded(cfg, tmp_path)
    data = json.loads(cfg.read_text())
    assert data["userID"] == "u"
    assert data["hasCompletedOnboarding"] is True
    assert data["projects"]["/other"] == {"allowedTools": ["x"]}
    assert data["projects"][str(tmp_path)] == {"history": [1], "hasTrustDialogAccepted": True}
    assert stat.S_IMODE(cfg.stat().st_mode) == 0o640


@pytest.mark.parametrize(
    "content", [b"{not json", b"[1, 2]", b'{"projects": []}', b'{"projects": {"%s": 3}}']
)
def test_onboarding_refuses_unmergeable_file_and_changes_nothing(tmp_path: Path, content: bytes) -> None:
    cfg = tmp_path / ".claude.json"
    cfg.write_bytes(content.replace(b"%s", str(tmp_path).encode()))
    before = cfg.read_bytes()
    with pytest.raises(OnboardingError, match="leaving it as it is"):
        mark_onboarded(cfg, tmp_path)
    assert cfg.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [".claude.json"]


def test_continuation_is_private_and_byte_exact(tmp_path: Path) -> None:
    transcript = b'{"m": "' + SEPARATORS + b'"}\n'
    path = write_continuation(tmp_path / "continuation.txt", [transcript[:5], transcript[5:]])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_bytes() == OPENING_LINE.encode() + b"\n\n" + transcript
    argv, stdin = prompt_delivery(harness_for("claude"), ["claude", "-p", "task"], path)
    assert argv == ["claude", "-p"]  # the continuation alone is the first turn
    assert stdin == path


@pytest.mark.parametrize(
    ("harness", "agent", "opening"),
    [
        ("claude", ["claude", "-p", "do the task"], ["claude", "-p"]),
        ("claude", ["claude", "do the task", "-p"], ["claude", "-p"]),
        (
            "claude",
            ["claude", "-p", "--model", "opus", "--allowedTools", "Bash Edit", "--verbose", "go on"],
            ["claude", "-p", "--model", "opus", "--allowedTools", "Bash Edit", "--verbose"],
        ),
        (
            "claude",
            ["claude", "--output-format=stream-json", "-p", "--", "-x looks like a flag"],
            ["claude", "--output-format=stream-json", "-p"],
        ),
        ("codex", ["codex", "exec", "do the task"], ["codex", "exec"]),
        (
            "codex",
            ["codex", "exec", "-m", "gpt-5", "--full-auto", "-C", "/w", "do the task"],
            ["codex", "exec", "-m", "gpt-5", "--full-auto", "-C", "/w"],
        ),
        (
            "codex",
            ["codex", "-c", "k=v", "exec", "exec"],
            ["codex", "-c", "k=v", "exec"],
        ),  # the prompt "exec"
    ],
)
def test_the_opening_command_drops_only_the_prompt(
    harness: str, agent: list[str], opening: list[str]
) -> None:
    assert harness_for(harness).opening_command(agent) == opening


def test_records_split_on_newline_only(tmp_path: Path) -> None:
    data = b'{"a": "' + SEPARATORS + b'"}\n{"b": 1}\n{"partial'
    assert split_records(data) == [b'{"a": "' + SEPARATORS + b'"}', b'{"b": 1}']
    assert len(data.decode().splitlines()) > 3  # what str.splitlines would have done
    path = tmp_path / "t.jsonl"
    path.write_bytes(data)
    assert count_records(path) == 2


def test_store_choice_precedence() -> None:
    both = WorkerSettings(checkpoint_bucket="b", checkpoint_root="/r")
    assert choose_store(both, remote=False, control_url=None) == StoreChoice("bucket", "b")
    root = WorkerSettings(checkpoint_root="/r")
    assert choose_store(root, remote=False, control_url=None) == StoreChoice("root", "/r")
    assert choose_store(both, remote=True, control_url="http://c") == StoreChoice("remote", "http://c")
    assert choose_store(WorkerSettings(), remote=False, control_url=None) is None


def test_relative_root_refused() -> None:
    with pytest.raises(StoreSelectionError, match="absolute path"):
        choose_store(WorkerSettings(checkpoint_root="ckpts"), remote=False, control_url=None)


def test_remote_needs_control_url() -> None:
    with pytest.raises(StoreSelectionError, match="control_url"):
        choose_store(WorkerSettings(), remote=True, control_url=None)


def test_no_store_message() -> None:
    with pytest.raises(Refused) as info:
        require_store(None)
    assert info.value.message == NO_STORE_MESSAGE == "no checkpoint store is configured for this worker"


def test_settings_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTIHOOKS_CHECKPOINT_BUCKET", "bk")
    monkeypatch.setenv("AGENTIHOOKS_ATTEMPTS_DIR", "/tmp/att")
    monkeypatch.setenv("AGENTIHOOKS_CAPTURE_INTERVAL_SECONDS", "5")
    s = WorkerSettings()
    assert (s.checkpoint_bucket, str(s.attempts_dir), s.capture_interval_seconds) == ("bk", "/tmp/att", 5.0)


def test_project_remotes() -> None:
    from agentihooks_worker.source import project_remote

    assert project_remote("github.com/acme/app", {}) == "https://github.com/acme/app.git"
    assert project_remote("github.com/acme/app", {"github.com/acme/app": "/mirror"}) == "/mirror"
    assert project_remote("local:demo", {}) is None
    assert project_remote("local:demo", {"local:demo": "/srv/demo.git"}) == "/srv/demo.git"


def test_captured_version_forms() -> None:
    from agentihooks_worker.harness import ClaudeCode, HarnessVersion
    from agentihooks_worker.versions import _captured_version

    assert _captured_version(ClaudeCode(), "2.1.332") == HarnessVersion(2, 1, 332)
    assert _captured_version(ClaudeCode(), "2.1.332 (Claude Code)") == HarnessVersion(2, 1, 332)
    assert _captured_version(ClaudeCode(), "weird") is None
    assert _captured_version(ClaudeCode(), None) is None
