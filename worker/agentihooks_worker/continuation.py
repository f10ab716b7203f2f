"""``continuation.txt``: the opening prompt of a reconstructed conversation.

It holds conversation content, so it is created readable by the worker user
only (0600) and is never logged. The archived transcript's bytes are copied
unchanged after the opening line.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

OPENING_LINE = "Continue from this recorded conversation. Native resume was unavailable."


def write_continuation(path: Path, transcript_chunks: Iterable[bytes]) -> Path:
    """Write the opening line then the transcript to ``path`` (0600), replacing any earlier file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(OPENING_LINE.encode() + b"\n\n")
            for chunk in transcript_chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def prompt_delivery(agent: list[str], continuation: Path) -> tuple[list[str], Path]:
    """The original command, with ``continuation`` on its standard input.

    Both CLIs take piped input as the opening context beside any prompt in the
    original command (``claude -p`` prepends it, ``codex exec`` adds it as a
    stdin block), so the command itself stays exactly as launched and no
    transcript runs into the kernel's argument size limit.
    """
    return list(agent), continuation
