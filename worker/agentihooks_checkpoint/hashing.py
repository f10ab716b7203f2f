"""Hash while reading: one pass, fixed-size chunks, constant memory."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

CHUNK = 1024 * 1024


def digest_of_bytes(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def digest_of_file(path: Path) -> tuple[str, int]:
    """``(sha256:<hex>, size)`` of a file, read in chunks."""
    h = hashlib.sha256()
    size = 0
    with path.open("rb") as f:
        for chunk in iter_chunks(f):
            h.update(chunk)
            size += len(chunk)
    return "sha256:" + h.hexdigest(), size


def iter_chunks(f: BinaryIO, limit: int | None = None) -> Iterable[bytes]:
    """Chunks of ``f``; with ``limit``, stop after that many bytes."""
    remaining = limit
    while remaining is None or remaining > 0:
        n = CHUNK if remaining is None else min(CHUNK, remaining)
        chunk = f.read(n)
        if not chunk:
            return
        if remaining is not None:
            remaining -= len(chunk)
        yield chunk
