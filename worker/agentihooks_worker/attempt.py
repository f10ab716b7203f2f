"""The attempt folder: one private tree per execution, and the environment the harness runs with.

Layout (kept from the original worker): ``<base>/<execution_id>/`` holding
``homes/ run/ checkouts/ worktrees/ spool/ tmp/ profiles/``. The harness home
is ``homes/<harness>``; ``HOME`` points there, with ``CLAUDE_CONFIG_DIR`` and
``CODEX_HOME`` beneath it. ``continuation.txt`` (reconstructed) and
``resume-prompt.txt`` (native) sit in the attempt folder.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agentihooks_checkpoint.directive import IDENTIFIER
from agentihooks_checkpoint.launch import TASK_ID
from agentihooks_checkpoint.scope import safe_segment

#: Longest task folder name kept readable (file systems take 255 bytes per name).
MAX_FOLDER = 200
SUBDIRS = ("homes", "run", "checkouts", "worktrees", "spool", "tmp", "profiles")
#: The worker's own credentials: the agent never sees them.
WORKER_ONLY = ("AGENTIHOOKS_WORKER_TOKEN",)


def task_folder(task_id: str) -> str:
    """One path segment for a task id; the original lets a task id hold ``:`` and ``/``.

    A plain identifier is its own folder name. Otherwise ``:`` and ``/`` become
    ``%3A`` and ``%2F`` (``%`` is never part of a task id, so two ids never
    share a folder); a name that would grow past :data:`MAX_FOLDER` characters
    is ``task%<sha256 hex of the id>`` instead (``%`` keeps it apart from every other name).
    """
    if re.fullmatch(IDENTIFIER, task_id):
        return safe_segment(task_id)
    if not re.fullmatch(TASK_ID, task_id):
        raise ValueError("not a task id")
    escaped = task_id.replace(":", "%3A").replace("/", "%2F")
    if len(escaped) > MAX_FOLDER:
        return "task%" + hashlib.sha256(task_id.encode("utf-8")).hexdigest()
    return escaped


@dataclass(frozen=True)
class AttemptLayout:
    """Paths of one attempt; :meth:`create` makes them (mode 0700)."""

    base: Path
    execution_id: str
    harness: str
    task_id: str

    @property
    def root(self) -> Path:
        return self.base / safe_segment(self.execution_id)

    @property
    def home(self) -> Path:
        """``HOME`` of the harness process."""
        return self.root / "homes" / safe_segment(self.harness)

    @property
    def claude_config_dir(self) -> Path:
        return self.home / ".claude"

    @property
    def codex_home(self) -> Path:
        return self.home / ".codex"

    @property
    def harness_home(self) -> Path:
        """Where the harness keeps its sessions (``CLAUDE_CONFIG_DIR`` or ``CODEX_HOME``)."""
        return self.claude_config_dir if self.harness == "claude" else self.codex_home

    @property
    def worktree(self) -> Path:
        """The task worktree the harness runs in (one folder, whatever the task id holds)."""
        return self.root / "worktrees" / task_folder(self.task_id)

    @property
    def continuation(self) -> Path:
        return self.root / "continuation.txt"

    @property
    def resume_prompt(self) -> Path:
        """The native resume command's standard input (see ``continuation.write_resume_prompt``)."""
        return self.root / "resume-prompt.txt"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    def create(self) -> None:
        """Make the attempt tree and the harness home; existing folders are kept."""
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        for name in SUBDIRS:
            (self.root / name).mkdir(mode=0o700, exist_ok=True)
        for path in (self.home, self.harness_home, self.worktree):
            path.mkdir(mode=0o700, parents=True, exist_ok=True)

    def environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) with the harness paths set, credentials removed."""
        env = dict(os.environ if base is None else base)
        for name in WORKER_ONLY:
            env.pop(name, None)
        env["HOME"] = str(self.home)
        env["CLAUDE_CONFIG_DIR"] = str(self.claude_config_dir)
        env["CODEX_HOME"] = str(self.codex_home)
        env["TMPDIR"] = str(self.tmp)
        return env
