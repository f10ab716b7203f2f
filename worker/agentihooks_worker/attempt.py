"""The attempt folder: one private tree per execution, and the environment the harness runs with.

Layout (kept from the original worker): ``<base>/<execution_id>/`` holding
``homes/ run/ checkouts/ worktrees/ spool/ tmp/ profiles/``. The harness home
is ``homes/<harness>``; ``HOME`` points there, with ``CLAUDE_CONFIG_DIR`` and
``CODEX_HOME`` beneath it. ``continuation.txt`` sits in the attempt folder.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agentihooks_checkpoint.scope import safe_segment

SUBDIRS = ("homes", "run", "checkouts", "worktrees", "spool", "tmp", "profiles")
#: The worker's own credentials: the agent never sees them.
WORKER_ONLY = ("AGENTIHOOKS_WORKER_TOKEN",)


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
        """The task worktree the harness runs in."""
        return self.root / "worktrees" / safe_segment(self.task_id)

    @property
    def continuation(self) -> Path:
        return self.root / "continuation.txt"

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
