"""The harness's first input after a restore: ``continuation.txt`` or ``resume-prompt.txt``.

``continuation.txt`` is the opening prompt of a reconstructed conversation. It
holds conversation content, so it is created readable by the worker user only
(0600) and is never logged. The archived transcript's bytes are copied
unchanged after the opening line.

``resume-prompt.txt`` is the next turn of a natively resumed conversation. A
worker has no terminal, and both real CLIs refuse to reopen a session without
one more prompt when none is attached (``claude --resume <id>`` exits 1 asking
for a prompt; ``codex exec resume <id>`` exits 1 with "No prompt provided via
stdin"), so the resume command reads this one line on its standard input.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from .harness.base import Harness

OPENING_LINE = "Continue from this recorded conversation. Native resume was unavailable."
#: The turn a natively resumed conversation continues with.
RESUME_LINE = "Continue from where this conversation stopped. The worker restarted and resumed it natively."


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


def prompt_delivery(harness: Harness, agent: list[str], continuation: Path) -> tuple[list[str], Path]:
    """The original command without its prompt (:meth:`Harness.opening_command`), with
    ``continuation`` on its standard input: the continuation is the whole first turn.

    Both CLIs read their prompt from piped input when the command names none (Claude Code 2.1's
    ``claude -p``, Codex 0.162's ``codex exec``). No transcript runs into the kernel's argument size
    limit, and the original task prompt, which the transcript already holds as its first turn, is not
    sent again ahead of it.
    """
    return harness.opening_command(agent), continuation


def write_resume_prompt(path: Path) -> Path:
    """Write :data:`RESUME_LINE` to ``path`` (0600), replacing any earlier file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(RESUME_LINE.encode())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path
