"""A checkpoint store in a local (or mounted) folder.

Writes go to a temporary file in the same folder, are fsynced and renamed into
place, so a reader sees an old or a new object, never half of one. The commit
pointer is linked into place, which fails if it already exists: write-once.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import BinaryIO

from ..errors import CheckpointExists, ObjectMissing, StoreConfigError, StoreError
from ..scope import StoreScope
from .base import CheckpointStore


class LocalStore(CheckpointStore):
    """Checkpoints under ``root`` (an absolute path)."""

    max_concurrency = 2

    def __init__(self, root: Path | str) -> None:
        root = Path(root)
        if not root.is_absolute():
            raise StoreConfigError("the checkpoint root must be an absolute path")
        self.root = root

    def __repr__(self) -> str:
        return "LocalStore()"

    def _path(self, scope: StoreScope, key: str) -> Path:
        parts = key.split("/")
        if not key or any(p in {"", ".", ".."} for p in parts):
            raise StoreError("not a store key")
        return self.root.joinpath(*scope.prefix.strip("/").split("/"), *parts)

    def open_read(self, scope: StoreScope, key: str) -> AbstractContextManager[BinaryIO]:
        return self._open(self._path(scope, key))

    @contextmanager
    def _open(self, path: Path) -> Iterator[BinaryIO]:
        try:
            f = path.open("rb")
        except FileNotFoundError as e:
            raise ObjectMissing("no such object") from e
        except OSError as e:
            raise StoreError("object cannot be read") from e
        with f:
            yield f

    def identity(self, scope: StoreScope, key: str) -> str | None:
        """Device, inode, size and change time: an in-place write or a replacement changes the change
        time (``ctime``), which, unlike the modification time, no user can set back."""
        try:
            st = self._path(scope, key).stat()
        except FileNotFoundError:
            return None
        return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"

    def delete(self, scope: StoreScope, key: str) -> None:
        self._path(scope, key).unlink(missing_ok=True)

    def modified_at(self, scope: StoreScope, key: str) -> float | None:
        try:
            return self._path(scope, key).stat().st_mtime
        except FileNotFoundError:
            return None

    def size_of(self, scope: StoreScope, key: str) -> int | None:
        try:
            return self._path(scope, key).stat().st_size
        except FileNotFoundError:
            return None

    def _write(self, final: Path, fill: Callable[[BinaryIO], object], *, once: bool = False) -> None:
        """Fill a temporary file beside ``final``, fsync it, then publish it.

        Published by rename (replacing any old object), or with ``once`` by a hard link that fails
        when ``final`` exists, followed by an fsync of the folder: the write-once commit pointer.
        """
        final.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, name = tempfile.mkstemp(dir=final.parent, prefix=".tmp-")
        tmp = Path(name)
        try:
            with os.fdopen(fd, "wb") as out:
                fill(out)
                out.flush()
                os.fsync(out.fileno())
            if not once:
                os.replace(tmp, final)
                return
            try:
                os.link(tmp, final)
            except FileExistsError as e:
                raise CheckpointExists("this checkpoint is already committed") from e
            dfd = os.open(final.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        finally:
            tmp.unlink(missing_ok=True)

    def write_file(self, scope: StoreScope, key: str, path: Path) -> None:
        def fill(out: BinaryIO) -> None:
            with path.open("rb") as src:
                shutil.copyfileobj(src, out, 1024 * 1024)

        self._write(self._path(scope, key), fill)

    def write_bytes(self, scope: StoreScope, key: str, data: bytes) -> None:
        self._write(self._path(scope, key), lambda out: out.write(data))

    def write_once(self, scope: StoreScope, key: str, data: bytes) -> None:
        self._write(self._path(scope, key), lambda out: out.write(data), once=True)

    def list_keys(self, scope: StoreScope, under: str) -> list[str]:
        base = self._path(scope, "x").parent
        start = base / under
        if not start.is_dir():
            return []
        out: list[str] = []
        for dirpath, _dirs, files in os.walk(start):
            for name in files:
                if not name.startswith(".tmp-"):
                    out.append((Path(dirpath) / name).relative_to(base).as_posix())
        return out
