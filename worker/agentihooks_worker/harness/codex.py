"""Codex: ``$CODEX_HOME``, ``sessions/YYYY/MM/DD/rollout-<local time>-<uuid>.jsonl``, ``codex resume <id>``.

A rollout's session id is the last 36 characters of its file stem; its first
line is a ``session_meta`` record. Only ``sessions/`` is ever restored: the
SQLite state beside it stores absolute paths of the old attempt. ``--last`` is
never used, it picks whatever session is newest.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import HarnessError
from ..hooks import codex_notify_override
from .base import Harness, HarnessVersion, NativeSession, check_session_id, safe_relpath

_VERSION = re.compile(r"^\s*codex-cli\s+(\d+\.\d+\.\d+\S*)\s*$")


def session_id_of(rollout: Path | PurePosixPath) -> str:
    """The session id a rollout file name carries."""
    return rollout.stem[-36:]


def read_session_meta(rollout: Path) -> dict[str, Any]:
    """The ``session_meta`` fields (``id``, ``cwd``, ``cli_version``) of a rollout's first line."""
    with rollout.open("rb") as f:
        first = f.readline()
    try:
        record = json.loads(first)
    except ValueError as e:
        raise HarnessError("the rollout's first line is not JSON") from e
    if not isinstance(record, dict) or record.get("type") != "session_meta":
        raise HarnessError("the rollout does not start with session_meta")
    payload = record.get("payload", record)
    if not isinstance(payload, dict):
        raise HarnessError("the rollout's session_meta has no fields")
    return payload


class Codex(Harness):
    """The Codex adapter (qualified: 0.162.x)."""

    name = "codex"
    executable = "codex"
    home_env = "CODEX_HOME"
    home_dirname = ".codex"
    qualified_series = (0, 162)
    resume_keeps = frozenset({"--dangerously-bypass-approvals-and-sandbox"})
    # Codex 0.162's options that take a value (``codex exec --help``); the rest are switches.
    valued_flags = frozenset(
        {
            "-m",
            "--model",
            "-c",
            "--config",
            "-s",
            "--sandbox",
            "-a",
            "--ask-for-approval",
            "-C",
            "--cd",
            "-p",
            "--profile",
            "-i",
            "--image",
            "--color",
            "--output-schema",
            "-o",
            "--output-last-message",
            "--add-dir",
            "--enable",
            "--disable",
            "--local-provider",
        }
    )
    subcommands = frozenset({"exec", "e"})

    def parse_version(self, output: str) -> HarnessVersion:
        lines = [ln for ln in output.splitlines() if ln.strip()]
        m = _VERSION.match(lines[0]) if lines else None
        if not m:
            raise HarnessError(f"unrecognised codex --version output: {output[:60]!r}")
        return HarnessVersion.parse(m[1])

    def resume_command(self, agent: Sequence[str], session_id: str) -> list[str]:
        check_session_id(session_id)
        if len(agent) > 1 and agent[1] == "exec":
            return [agent[0], "exec", *self._kept_flags(agent), "resume", session_id]
        return [agent[0], "resume", *self._kept_flags(agent), session_id]

    def with_capture_hook(self, argv: Sequence[str], home: Path) -> list[str]:
        """``-c notify=[...]`` right after ``codex`` (or ``codex exec``): each finished turn appends a byte
        to the signal file, then runs the user's own ``notify``. Unchanged when $CODEX_HOME/config.toml
        cannot be read: the file-change watch still sees the rollout grow."""
        value = codex_notify_override(home / "config.toml")
        if value is None or not argv:
            return list(argv)
        at = 2 if len(argv) > 1 and argv[1] in self.subcommands else 1
        return [*argv[:at], "-c", value, *argv[at:]]

    def _rollouts(self, home: Path) -> list[Path]:
        return [p for p in (home / "sessions").glob("*/*/*/rollout-*.jsonl") if p.is_file()]

    def find_session(self, home: Path, session_id: str, cwd: Path | None = None) -> NativeSession | None:
        check_session_id(session_id)
        for rollout in sorted(self._rollouts(home)):
            if session_id_of(rollout) == session_id:
                return self._session_at(home, rollout)
        return None

    def newest_session(self, home: Path, cwd: Path | None = None) -> NativeSession | None:
        found = self._rollouts(home)
        if cwd is not None:
            found = [p for p in found if _meta_cwd(p) == str(cwd)]
        if not found:
            return None
        return self._session_at(home, max(found, key=lambda p: (p.stat().st_mtime_ns, p.name)))

    def _session_at(self, home: Path, rollout: Path) -> NativeSession:
        rel = PurePosixPath(rollout.relative_to(home).as_posix())
        return NativeSession(session_id=session_id_of(rollout), files=(rel,), transcript=rel)

    def restore_target(self, relpath: PurePosixPath, cwd: Path) -> PurePosixPath | None:
        if not safe_relpath(relpath) or relpath.parts[0] != "sessions" or relpath.suffix != ".jsonl":
            return None
        return relpath


def _meta_cwd(rollout: Path) -> str | None:
    try:
        cwd = read_session_meta(rollout).get("cwd")
    except (HarnessError, OSError):
        return None
    return cwd if isinstance(cwd, str) else None
