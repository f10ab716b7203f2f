"""Put a checkpoint's verified native session files into the new attempt's harness home.

The native archive's members are named relative to the capturing attempt's
``HOME`` (``.claude/projects/...``, ``.codex/sessions/...``); members named
relative to the harness home itself are accepted too. Each member goes where
the adapter says (Claude Code's project folder is re-keyed to the new
worktree), bytes unchanged, files 0600. Members the adapter never restores
(Codex's SQLite state, anything outside the session folders) are skipped.
Data is copied out of a staged archive with ``copy_file_range``; the same
copier extracts the untracked-files archive into the worktree. When the
Validator staged an archive unpacked (its member files, already checked and
hashed), :func:`place_native` and :func:`place_files` rename those very files
into place instead (a copy only across filesystems).
"""

from __future__ import annotations

import errno
import os
import tarfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from agentihooks_checkpoint.archive import ArchiveRefused, check_members, safe_member_name

from .harness import Harness


def harness_relative(harness: Harness, member: PurePosixPath) -> PurePosixPath:
    """``member`` relative to the harness home (strips a leading ``.claude``/``.codex``)."""
    if member.parts and member.parts[0] == harness.home_dirname:
        return PurePosixPath(*member.parts[1:])
    return member


def restore_native(archive: Path, harness: Harness, harness_home: Path, cwd: Path) -> list[Path]:
    """Extract the session files of ``archive`` into ``harness_home``; return the files written."""
    with tarfile.open(archive, "r:") as tar:
        members = tar.getmembers()
        check_members(members, declared=archive.stat().st_size)
        plan: list[tuple[tarfile.TarInfo, PurePosixPath]] = []
        for m in members:
            if not m.isreg():
                continue
            rel = harness_relative(harness, safe_member_name(m.name))
            target = harness.restore_target(rel, cwd) if rel.parts else None
            if target is not None:
                plan.append((m, target))
    if not plan:
        raise ArchiveRefused("the native archive holds no session file this harness restores")
    return copy_members(archive, plan, harness_home)


def place_native(members: Mapping[str, Path], harness: Harness, harness_home: Path, cwd: Path) -> list[Path]:
    """:func:`restore_native` for an archive staged unpacked: ``members`` maps member name → file."""
    plan: list[tuple[Path, PurePosixPath]] = []
    for name, staged in members.items():
        rel = harness_relative(harness, safe_member_name(name))
        target = harness.restore_target(rel, cwd) if rel.parts else None
        if target is not None:
            plan.append((staged, target))
    if not plan:
        raise ArchiveRefused("the native archive holds no session file this harness restores")
    return move_files(plan, harness_home)


def place_files(members: Mapping[str, Path], dest: Path) -> list[Path]:
    """:func:`extract_files` for an archive staged unpacked: every file at its own name under ``dest``."""
    return move_files([(staged, safe_member_name(name)) for name, staged in members.items()], dest)


def move_files(plan: list[tuple[Path, PurePosixPath]], root: Path) -> list[Path]:
    """Move each staged file to ``root/<target>`` (0600; never through or onto a symlink)."""
    written: list[Path] = []
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    for staged, target in plan:
        dest = _make_parents(root, target)
        if dest.is_symlink():
            raise ArchiveRefused("a symlink stands where a restored file goes")
        os.chmod(staged, 0o600, follow_symlinks=False)
        try:
            os.rename(staged, dest)
        except OSError as e:
            if e.errno != errno.EXDEV:
                raise
            _copy_file(staged, dest)
        written.append(dest)
    return written


def _copy_file(src: Path, dest: Path) -> None:
    """Across filesystems: copy the staged file's bytes (0600, never through a symlink)."""
    size = src.stat().st_size
    with src.open("rb") as f:
        fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            _copy_range(f.fileno(), fd, 0, size)
            os.fchmod(fd, 0o600)
        finally:
            os.close(fd)


def extract_files(archive: Path, dest: Path) -> list[Path]:
    """Extract every regular file of a checked archive under ``dest`` at its own name."""
    with tarfile.open(archive, "r:") as tar:
        members = tar.getmembers()
        check_members(members, declared=archive.stat().st_size)
    plan = [(m, safe_member_name(m.name)) for m in members if m.isreg()]
    return copy_members(archive, plan, dest)


def copy_members(archive: Path, plan: list[tuple[tarfile.TarInfo, PurePosixPath]], root: Path) -> list[Path]:
    """Copy each planned member's bytes to ``root/<target>`` (0600, never through a symlink)."""
    written: list[Path] = []
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    with archive.open("rb") as src:
        for m, target in plan:
            dest = _make_parents(root, target)
            fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            try:
                _copy_range(src.fileno(), fd, m.offset_data, m.size)
                os.fchmod(fd, 0o600)
            finally:
                os.close(fd)
            written.append(dest)
    return written


def _make_parents(root: Path, rel: PurePosixPath) -> Path:
    cur = root
    for part in rel.parts[:-1]:
        cur = cur / part
        if cur.is_symlink():
            raise ArchiveRefused("a symlink stands where a session folder goes")
        cur.mkdir(mode=0o700, exist_ok=True)
    return cur / rel.parts[-1]


def _copy_range(src: int, dst: int, offset: int, size: int) -> None:
    left = size
    pos = offset
    while left > 0:
        try:
            n = os.copy_file_range(src, dst, min(left, 1 << 30), pos)
        except OSError:
            n = 0
        if n <= 0:  # filesystems without copy_file_range: plain reads
            data = os.pread(src, min(left, 1 << 20), pos)
            if not data:
                raise ArchiveRefused("the native archive ends early")
            n = os.write(dst, data)
        left -= n
        pos += n
