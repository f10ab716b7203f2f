"""Tar archives of regular files for multi-file roles (native session files, untracked files).

Archives are plain ustar/pax tars holding only regular files and directories
with relative member names. Anything else (symlinks, hard links, devices,
``..`` or absolute names) makes the archive hostile: checking refuses it and
extraction never writes outside its target folder.
"""

from __future__ import annotations

import os
import stat
import tarfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import IO

from .errors import CheckpointError


class ArchiveRefused(CheckpointError):
    """An archive holds a member that could escape or is not a regular file."""


def build_archive(out: Path, files: Iterable[tuple[Path, str]]) -> None:
    """Write a tar of ``(source file, relative member name)`` pairs; members are 0600 regular files."""
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for src, name in files:
            safe_member_name(name)
            st = src.stat(follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode):
                raise ArchiveRefused("only regular files can be archived")
            info = tarfile.TarInfo(name)
            info.size = st.st_size
            info.mtime = int(st.st_mtime)
            info.mode = 0o600
            with src.open("rb") as f:
                tar.addfile(info, f)


def safe_member_name(name: str) -> PurePosixPath:
    """The member name as a relative path, or raise :class:`ArchiveRefused`."""
    p = PurePosixPath(name)
    if (
        not name
        or "\\" in name
        or "\x00" in name
        or p.is_absolute()
        or any(part in {"..", ""} for part in p.parts)
    ):
        raise ArchiveRefused("archive member name escapes its folder")
    if p.parts and p.parts[0] == ".":
        p = PurePosixPath(*p.parts[1:])
    return p


def check_members(members: Iterable[tarfile.TarInfo]) -> int:
    """Refuse any member that is not a safe regular file or directory; return the file count."""
    files = 0
    seen: set[PurePosixPath] = set()
    for m in members:
        if _check_member(m, seen) is not None:
            files += 1
    return files


def _check_member(m: tarfile.TarInfo, seen: set[PurePosixPath]) -> PurePosixPath | None:
    """The checked name of a regular file (``None`` for a folder); raise for anything else."""
    p = safe_member_name(m.name)
    if not (m.isreg() or m.isdir()):
        raise ArchiveRefused("archive holds a link or special file")
    if not m.isreg():
        return None
    if p in seen:
        raise ArchiveRefused("archive repeats a member")
    seen.add(p)
    return p


def check_stream(fileobj: IO[bytes]) -> int:
    """Read a whole archive from a stream, checking every member (data is read, not kept)."""
    try:
        with tarfile.open(fileobj=fileobj, mode="r|", bufsize=1 << 20) as tar:
            return check_members(tar)
    except tarfile.TarError as e:
        raise ArchiveRefused("not a readable tar archive") from e


def unpack_stream(fileobj: IO[bytes], dest: Path) -> dict[str, Path]:
    """Check a whole archive from a stream as :func:`check_stream` does, writing its files as they pass.

    Every regular member lands at ``dest/<name>`` (0600; folders 0700; never
    over an existing file or through a symlink), so a verifier can keep the
    bytes it hashes without keeping the tar around them. Returns member name →
    file written. On :class:`ArchiveRefused` some files may already be written
    under ``dest``: the caller discards ``dest``.
    """
    written: dict[str, Path] = {}
    seen: set[PurePosixPath] = set()
    try:
        with tarfile.open(fileobj=fileobj, mode="r|", bufsize=1 << 20) as tar:
            for m in tar:
                p = _check_member(m, seen)
                if p is None:
                    continue
                if not p.parts:
                    raise ArchiveRefused("archive member name escapes its folder")
                src = tar.extractfile(m)
                if src is None:
                    raise ArchiveRefused("archive member has no data")
                written[str(p)] = _write_new(dest, p, src)
    except tarfile.TarError as e:
        raise ArchiveRefused("not a readable tar archive") from e
    return written


def _write_new(dest: Path, rel: PurePosixPath, src: IO[bytes]) -> Path:
    try:
        _mkdirs(dest, rel.parts[:-1], 0o700)
        target = dest.joinpath(*rel.parts)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError as e:  # a file where a folder goes, or the reverse
        raise ArchiveRefused("archive members collide") from e
    with os.fdopen(fd, "wb") as out:
        while chunk := src.read(1 << 20):
            out.write(chunk)
    return target


def extract_archive(
    archive: Path, dest: Path, *, file_mode: int = 0o600, dir_mode: int = 0o700
) -> list[Path]:
    """Extract a checked archive under ``dest``; returns the files written.

    Refuses (before writing anything) hostile members, and never follows a
    symlink found inside ``dest`` while writing.
    """
    try:
        with tarfile.open(archive, "r:") as tar:
            members = tar.getmembers()
            check_members(members)
            written: list[Path] = []
            for m in members:
                rel = safe_member_name(m.name)
                target = dest.joinpath(*rel.parts)
                if m.isdir():
                    _mkdirs(dest, rel.parts, dir_mode)
                    continue
                _mkdirs(dest, rel.parts[:-1], dir_mode)
                src = tar.extractfile(m)
                if src is None:
                    raise ArchiveRefused("archive member has no data")
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, file_mode)
                with os.fdopen(fd, "wb") as out:
                    while chunk := src.read(1024 * 1024):
                        out.write(chunk)
                os.chmod(target, file_mode)
                written.append(target)
            return written
    except tarfile.TarError as e:
        raise ArchiveRefused("not a readable tar archive") from e
    except OSError as e:
        raise ArchiveRefused("archive could not be extracted safely") from e


def _mkdirs(dest: Path, parts: tuple[str, ...], mode: int) -> None:
    cur = dest
    for part in parts:
        cur = cur / part
        if cur.is_symlink():
            raise ArchiveRefused("a symlink stands where an archive folder goes")
        if not cur.exists():
            cur.mkdir(mode=mode)
