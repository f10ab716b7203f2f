"""Claude Code: ``$CLAUDE_CONFIG_DIR``, ``projects/<encoded cwd>/<id>.jsonl``, ``claude --resume <id>``.

Claude Code keys a project's sessions by its working directory with every
character outside ``[A-Za-z0-9]`` turned into ``-``. A replacement runs in a
new attempt folder, so captured files are placed under the new worktree's key;
their bytes are never touched. ``--continue`` is never used: run from another
folder it silently starts a new conversation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from ..errors import HarnessError
from .base import Harness, HarnessVersion, NativeSession, check_session_id, safe_relpath

_VERSION = re.compile(r"^\s*(\d+\.\d+\.\d+\S*)\s+\(Claude Code\)\s*$")


def encode_cwd(cwd: Path | str) -> str:
    """The folder name Claude Code uses for ``cwd`` under ``projects/``."""
    return re.sub(r"[^A-Za-z0-9]", "-", str(cwd))


class ClaudeCode(Harness):
    """The Claude Code adapter (qualified: 2.1.x)."""

    name = "claude"
    executable = "claude"
    home_env = "CLAUDE_CONFIG_DIR"
    home_dirname = ".claude"
    qualified_series = (2, 1)
    # Print mode and its output format stay as launched: whoever reads the worker's output (a log
    # shipper parsing stream-json, say) reads the resumed run the same way.
    resume_keeps = frozenset({"--dangerously-skip-permissions", "--verbose", "-p", "--print"})
    resume_keeps_valued = frozenset({"--output-format", "--model", "--permission-mode"})
    # Claude Code 2.1's options that take a value (``claude --help``); the rest are switches.
    valued_flags = frozenset(
        {
            *resume_keeps_valued,
            "--add-dir",
            "--agent",
            "--agents",
            "--allowedTools",
            "--allowed-tools",
            "--append-system-prompt",
            "--betas",
            "--debug-file",
            "--disallowedTools",
            "--disallowed-tools",
            "--fallback-model",
            "--input-format",
            "--json-schema",
            "--max-budget-usd",
            "--max-turns",
            "--mcp-config",
            "--permission-prompt-tool",
            "--plugin-dir",
            "--session-id",
            "--setting-sources",
            "--settings",
            "--system-prompt",
            "--tools",
        }
    )

    def parse_version(self, output: str) -> HarnessVersion:
        lines = [ln for ln in output.splitlines() if ln.strip()]
        m = _VERSION.match(lines[0]) if lines else None
        if not m:
            raise HarnessError(f"unrecognised claude --version output: {output[:60]!r}")
        return HarnessVersion.parse(m[1])

    def resume_command(self, agent: Sequence[str], session_id: str) -> list[str]:
        return [agent[0], *self._kept_flags(agent), "--resume", check_session_id(session_id)]

    def transcript_path(self, session_id: str, cwd: Path) -> PurePosixPath:
        """Relative path of a session's transcript for a project run in ``cwd``."""
        return PurePosixPath("projects", encode_cwd(cwd), f"{check_session_id(session_id)}.jsonl")

    def find_session(self, home: Path, session_id: str, cwd: Path | None = None) -> NativeSession | None:
        check_session_id(session_id)
        if cwd is not None:
            candidates = [home / self.transcript_path(session_id, cwd)]
        else:
            candidates = sorted((home / "projects").glob(f"*/{session_id}.jsonl"))
        for transcript in candidates:
            if transcript.is_file():
                return self._session_at(home, transcript)
        return None

    def newest_session(self, home: Path, cwd: Path | None = None) -> NativeSession | None:
        pattern = f"{encode_cwd(cwd)}/*.jsonl" if cwd is not None else "*/*.jsonl"
        found = [p for p in (home / "projects").glob(pattern) if p.is_file()]
        if not found:
            return None
        return self._session_at(home, max(found, key=lambda p: (p.stat().st_mtime_ns, p.name)))

    def _session_at(self, home: Path, transcript: Path) -> NativeSession:
        session_id = transcript.stem
        files = [transcript]
        extra = transcript.parent / session_id  # subagent transcripts and tool results live beside it
        if extra.is_dir():
            files += sorted(p for p in extra.rglob("*") if p.is_file() and not p.is_symlink())
        rel = tuple(PurePosixPath(p.relative_to(home).as_posix()) for p in files)
        return NativeSession(session_id=session_id, files=rel, transcript=rel[0])

    def restore_target(self, relpath: PurePosixPath, cwd: Path) -> PurePosixPath | None:
        if not safe_relpath(relpath) or len(relpath.parts) < 3 or relpath.parts[0] != "projects":
            return None
        return PurePosixPath("projects", encode_cwd(cwd), *relpath.parts[2:])
