"""Transcript records: JSON lines split on ``b"\\n"`` and nothing else.

Conversations carry raw U+2028 and U+2029; ``str.splitlines`` would cut a
record in two at them. Everything here works on bytes and copies them unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

CHUNK = 1 << 20


def split_records(data: bytes) -> list[bytes]:
    """Complete records of ``data`` (each without its newline); a trailing partial record is dropped."""
    parts = data.split(b"\n")
    return [p for p in parts[:-1] if p]


def iter_lines(read: Callable[[int], bytes], size: int = CHUNK) -> Iterator[bytes]:
    """Yield ``b"\\n"``-terminated lines (the last one may lack it) from a ``read(size)`` callable."""
    pending = b""
    while chunk := read(size):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line + b"\n"
    if pending:
        yield pending


def count_records(path: Path) -> int:
    """How many complete, non-empty records ``path`` holds (streamed)."""
    with path.open("rb") as f:
        return sum(1 for line in iter_lines(f.read) if line.endswith(b"\n") and len(line) > 1)
