"""Tar archives of regular files for multi-file roles (native session files, untracked files).

Archives are plain ustar/pax tars holding only regular files and directories
with relative member names. Anything else (symlinks, hard links, devices,
FIFOs, sparse members, ``..`` or absolute names) makes the archive hostile:
checking refuses it and extraction never writes outside its target folder.

Every check also applies :class:`ArchiveLimits`: at most ``max_members``
members, and an expanded size (the sum of the member sizes the headers claim)
of at most the archive's own declared size and at most ``max_expanded``. A tar
of regular files is never larger expanded than stored, so the declared size is
a sound bound; a member that claims more is refused from its header, before a
byte of it is written. Refusals name the member (``repr``, shortened).
"""

from __future__ import annotations

import os
import stat
import tarfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from .errors import CheckpointError

#: Default cap on the members of one archive (files and folders).
MAX_MEMBERS = 100_000
#: Default absolute cap on the expanded size of one archive (bytes).
MAX_EXPANDED = 8 * 1024**3
MEMBERS_ENV = "AGENTIHOOKS_ARCHIVE_MAX_MEMBERS"
EXPANDED_ENV = "AGENTIHOOKS_ARCHIVE_MAX_EXPANDED_BYTES"


class ArchiveRefused(CheckpointError):
    """An archive holds a member that could escape, is not a regular file, or breaks a limit.

    ``member`` is the offending member's name when one is to blame.
    """

    def __init__(self, message: str, member: str | None = None) -> None:
        super().__init__(message)
        self.member = member


@dataclass(frozen=True)
class ArchiveLimits:
    """Caps every archive check applies (see the module docstring)."""

    max_members: int = MAX_MEMBERS
    max_expanded: int = MAX_EXPANDED

    def __post_init__(self) -> None:
        if self.max_members < 1 or self.max_expanded < 0:
            raise ValueError("archive limits must be positive")

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> ArchiveLimits:
        """From ``AGENTIHOOKS_ARCHIVE_MAX_MEMBERS`` and ``AGENTIHOOKS_ARCHIVE_MAX_EXPANDED_BYTES``."""

        def number(name: str, default: int) -> int:
            raw = environ.get(name, "").strip()
            if not raw:
                return default
            try:
                value = int(raw)
            except ValueError as e:
                raise ValueError(f"{name} must be an integer, got {raw!r}") from e
            if value < 1:
                raise ValueError(f"{name} must be at least 1")
            return value

        return cls(number(MEMBERS_ENV, MAX_MEMBERS), number(EXPANDED_ENV, MAX_EXPANDED))


def shown(name: str) -> str:
    """A member name as a refusal shows it: ``repr`` (control characters escaped), at most 160 characters."""
    text = repr(name)
    return text if len(text) <= 160 else text[:157] + "..."


def _kind(m: tarfile.TarInfo) -> str:
    if m.issym():
        return "a symbolic link"
    if m.islnk():
        return "a hard link"
    if m.ischr():
        return "a character device"
    if m.isblk():
        return "a block device"
    if m.isfifo():
        return "a FIFO"
    return f"of unsupported type {m.type!r}"


class _Budget:
    """Members and expanded bytes seen so far in one archive, against its limits."""

    def __init__(self, limits: ArchiveLimits | None, declared: int | None) -> None:
        self.limits = limits or ArchiveLimits()
        self.declared = declared
        self.members = 0
        self.expanded = 0
        self.seen: set[PurePosixPath] = set()

    def take(self, m: tarfile.TarInfo) -> None:
        self.members += 1
        if self.members > self.limits.max_members:
            raise ArchiveRefused(
                f"archive has more than {self.limits.max_members} members (at {shown(m.name)})", m.name
            )
        self.expanded += max(0, m.size)
        if self.declared is not None and self.expanded > self.declared:
            raise ArchiveRefused(
                f"archive member {shown(m.name)} expands past the archive's declared size "
                f"of {self.declared} bytes",
                m.name,
            )
        if self.expanded > self.limits.max_expanded:
            raise ArchiveRefused(
                f"archive member {shown(m.name)} expands past the cap of {self.limits.max_expanded} bytes",
                m.name,
            )


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


def check_members(
    members: Iterable[tarfile.TarInfo], limits: ArchiveLimits | None = None, *, declared: int | None = None
) -> int:
    """Refuse any member that is not a safe regular file or directory, or breaks a limit.

    ``declared`` is the archive's own size in bytes when known (the expanded size may not pass it).
    Returns the file count.
    """
    files = 0
    budget = _Budget(limits, declared)
    for m in members:
        if _check_member(m, budget) is not None:
            files += 1
    return files


def _check_member(m: tarfile.TarInfo, budget: _Budget) -> PurePosixPath | None:
    """The checked name of a regular file (``None`` for a folder); raise for anything else.

    Decided from the member's header alone, before any of its data is read.
    """
    try:
        p = safe_member_name(m.name)
    except ArchiveRefused as e:
        raise ArchiveRefused(f"archive member {shown(m.name)} escapes its folder", m.name) from e
    if m.issparse():  # expands to its claimed size with zeros: a few KiB can make GiB
        raise ArchiveRefused(f"archive member {shown(m.name)} is a sparse file", m.name)
    if not (m.isreg() or m.isdir()):
        raise ArchiveRefused(f"archive member {shown(m.name)} is {_kind(m)}", m.name)
    if m.isreg() and m.type not in (tarfile.REGTYPE, tarfile.AREGTYPE):  # contiguous files and the like
        raise ArchiveRefused(f"archive member {shown(m.name)} is {_kind(m)}", m.name)
    budget.take(m)
    if not m.isreg():
        return None
    if p in budget.seen:
        raise ArchiveRefused(f"archive repeats the member {shown(m.name)}", m.name)
    budget.seen.add(p)
    return p


def check_stream(
    fileobj: IO[bytes], limits: ArchiveLimits | None = None, *, declared: int | None = None
) -> int:
    """Read a whole archive from a stream, checking every member (data is read, not kept)."""
    try:
        with tarfile.open(fileobj=fileobj, mode="r|", bufsize=1 << 20) as tar:
            return check_members(tar, limits, declared=declared)
    except tarfile.TarError as e:
        raise ArchiveRefused("not a readable tar archive") from e


def unpack_stream(
    fileobj: IO[bytes], dest: Path, limits: ArchiveLimits | None = None, *, declared: int | None = None
) -> dict[str, Path]:
    """Check a whole archive from a stream as :func:`check_stream` does, writing its files as they pass.

    Every regular member lands at ``dest/<name>`` (0600; folders 0700; never
    over an existing file or through a symlink), so a verifier can keep the
    bytes it hashes without keeping the tar around them. Returns member name →
    file written. On :class:`ArchiveRefused` some files may already be written
    under ``dest``: the caller discards ``dest``.
    """
    written: dict[str, Path] = {}
    budget = _Budget(limits, declared)
    try:
        with tarfile.open(fileobj=fileobj, mode="r|", bufsize=1 << 20) as tar:
            for m in tar:
                p = _check_member(m, budget)
                if p is None:
                    continue
                if not p.parts:
                    raise ArchiveRefused(f"archive member {shown(m.name)} escapes its folder", m.name)
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
    archive: Path,
    dest: Path,
    *,
    file_mode: int = 0o600,
    dir_mode: int = 0o700,
    limits: ArchiveLimits | None = None,
) -> list[Path]:
    """Extract a checked archive under ``dest``; returns the files written.

    Refuses (before writing anything) hostile members and archives past their
    limits (the file's own size is the declared size), and never follows a
    symlink found inside ``dest`` while writing.
    """
    try:
        with tarfile.open(archive, "r:") as tar:
            members = tar.getmembers()
            check_members(members, limits, declared=archive.stat().st_size)
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
