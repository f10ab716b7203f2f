"""Native file placement from real tar archives: what lands where, what is never restored, hostile input."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

import pytest
from agentihooks_checkpoint.archive import ArchiveRefused, build_archive
from agentihooks_worker.harness import ClaudeCode, Codex
from agentihooks_worker.harness.claude import encode_cwd
from agentihooks_worker.native import extract_files, restore_native

SID = "0f9e3a52-7c1d-4a8e-9b61-2d5c8e4f7a10"
BODY = '{"text": "a\u2028b\u2029c"}\n'.encode()


def archive(tmp_path: Path, members: dict[str, bytes]) -> Path:
    files = []
    for i, (name, data) in enumerate(members.items()):
        src = tmp_path / f"src-{i}"
        src.write_bytes(data)
        files.append((src, name))
    out = tmp_path / "native.tar"
    build_archive(out, files)
    return out


def test_codex_restores_sessions_only(tmp_path: Path) -> None:
    rollout = f".codex/sessions/2026/11/30/rollout-2026-11-30T08-00-00-{SID}.jsonl"
    tar = archive(tmp_path, {rollout: BODY, ".codex/state_5.sqlite": b"SQLite", ".codex/config.toml": b"x"})
    home = tmp_path / "home" / ".codex"
    written = restore_native(tar, Codex(), home, Path("/new/wt"))
    assert written == [home / rollout.removeprefix(".codex/")]
    assert written[0].read_bytes() == BODY
    assert stat.S_IMODE(written[0].stat().st_mode) == 0o600
    assert not list(home.rglob("*.sqlite")) and not (home / "config.toml").exists()


def test_claude_files_are_rekeyed_to_the_new_worktree(tmp_path: Path) -> None:
    old = encode_cwd("/home/worker/attempts/exe-old/worktrees/t")
    tar = archive(
        tmp_path,
        {
            f".claude/projects/{old}/{SID}.jsonl": BODY,
            f"projects/{old}/{SID}/subagents/a.jsonl": b"{}\n",  # relative to the harness home also works
            ".claude/settings.json": b"{}",
        },
    )
    home, new = tmp_path / "cfg", Path("/home/worker/attempts/exe-new/worktrees/t")
    written = restore_native(tar, ClaudeCode(), home, new)
    project = home / "projects" / encode_cwd(new)
    assert sorted(written) == sorted([project / f"{SID}.jsonl", project / SID / "subagents" / "a.jsonl"])
    assert (project / f"{SID}.jsonl").read_bytes() == BODY
    assert not (home / "settings.json").exists()


def test_archive_without_a_session_file_is_refused(tmp_path: Path) -> None:
    tar = archive(tmp_path, {".codex/state_5.sqlite": b"SQLite"})
    with pytest.raises(ArchiveRefused, match="no session file"):
        restore_native(tar, Codex(), tmp_path / "home", Path("/wt"))
    assert not (tmp_path / "home").exists()


def hostile(tmp_path: Path, kind: str) -> Path:
    out = tmp_path / "hostile.tar"
    with tarfile.open(out, "w") as tar:
        info = tarfile.TarInfo(f".codex/sessions/2026/11/30/rollout-x-{SID}.jsonl")
        if kind == "symlink":
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(info)
        else:
            info.name = "../../escape.jsonl" if kind == "dotdot" else "/abs/escape.jsonl"
            info.size = 3
            tar.addfile(info, io.BytesIO(b"{}\n"))
    return out


@pytest.mark.parametrize("kind", ["symlink", "dotdot", "absolute"])
def test_hostile_archives_write_nothing(tmp_path: Path, kind: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with pytest.raises(ArchiveRefused):
        restore_native(hostile(tmp_path, kind), Codex(), home, Path("/wt"))
    with pytest.raises(ArchiveRefused):
        extract_files(hostile(tmp_path, kind), home)
    assert list(home.iterdir()) == []
    assert not (tmp_path.parent / "escape.jsonl").exists()


def test_symlink_planted_in_the_target_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "wt"
    dest.mkdir()
    os.symlink(outside, dest / "notes")
    tar = archive(tmp_path, {"notes/untracked.md": b"x"})
    with pytest.raises(ArchiveRefused, match="symlink"):
        extract_files(tar, dest)
    assert list(outside.iterdir()) == []
