"""The interface every harness adapter implements, and what they share.

The boot sequence, the Restorer and capture only talk to a harness through
this interface: where its home is, how it prints its version, which versions
are qualified for native resume, how to reopen a session, and which files in
its home hold a session.
"""

from __future__ import annotations

import os
import re
import subprocess
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import HarnessError


@dataclass(frozen=True, order=True)
class HarnessVersion:
    """A parsed ``major.minor.patch`` harness version."""

    major: int
    minor: int
    patch: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"

    @classmethod
    def parse(cls, text: str) -> HarnessVersion:
        """Parse a bare ``1.2.3`` (an optional pre-release or build suffix is ignored)."""
        m = re.fullmatch(r"\s*v?(\d+)\.(\d+)\.(\d+)(?:[-+][0-9A-Za-z.+-]*)?\s*", text)
        if not m:
            raise HarnessError(f"not a harness version: {text[:40]!r}")
        return cls(int(m[1]), int(m[2]), int(m[3]))


@dataclass(frozen=True)
class NativeSession:
    """One session's files in a harness home, as paths relative to that home."""

    session_id: str
    files: tuple[PurePosixPath, ...]
    #: The file whose records are the conversation (the Claude transcript, the Codex rollout).
    transcript: PurePosixPath


class Harness(ABC):
    """A supported agent CLI."""

    #: The launch record's ``harness`` value.
    name: str
    #: The executable's usual name.
    executable: str
    #: Environment variable naming the home, and the folder under ``$HOME`` used without it.
    home_env: str
    home_dirname: str
    #: ``(major, minor)`` series qualified for native resume.
    qualified_series: tuple[int, int]
    #: Boolean flags of the original command that a native resume keeps.
    resume_keeps: frozenset[str] = frozenset()
    #: Flags with a value (``--flag value`` or ``--flag=value``) that a native resume keeps with it.
    resume_keeps_valued: frozenset[str] = frozenset()
    #: Every flag of the CLI that takes a separate value (so its value is not taken for the prompt).
    valued_flags: frozenset[str] = frozenset()
    #: Subcommands that may come first among the positional arguments (``codex exec``).
    subcommands: frozenset[str] = frozenset()

    def with_capture_hook(self, argv: Sequence[str], home: Path) -> list[str]:
        """``argv`` with what makes the CLI announce its turns to the worker's continuous capture, where
        that is on the command line (Claude Code's hooks are in its settings file instead)."""
        return list(argv)

    def home(self, env: Mapping[str, str]) -> Path:
        """The harness home the CLI would use with ``env``."""
        explicit = env.get(self.home_env)
        if explicit:
            return Path(explicit)
        home = env.get("HOME")
        if not home:
            raise HarnessError(f"neither {self.home_env} nor HOME is set")
        return Path(home) / self.home_dirname

    @abstractmethod
    def parse_version(self, output: str) -> HarnessVersion:
        """Parse the CLI's ``--version`` output; raise :class:`HarnessError` if it is not recognised."""

    def is_qualified(self, version: HarnessVersion) -> bool:
        """True when ``version`` is in the series qualified for native resume."""
        return (version.major, version.minor) == self.qualified_series

    def installed_version(
        self, executable: str, env: Mapping[str, str], timeout: float = 60
    ) -> HarnessVersion:
        """Run ``<executable> --version`` and parse what it prints."""
        try:
            done = subprocess.run(
                [executable, "--version"],
                env=dict(env),
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise HarnessError(f"could not run {os.path.basename(executable)} --version: {e}") from e
        if done.returncode != 0:
            raise HarnessError(f"{os.path.basename(executable)} --version exited {done.returncode}")
        return self.parse_version(done.stdout)

    @abstractmethod
    def resume_command(self, agent: Sequence[str], session_id: str) -> list[str]:
        """The argv that reopens ``session_id``, built from the launch record's ``agent`` argv."""

    @abstractmethod
    def find_session(self, home: Path, session_id: str, cwd: Path | None = None) -> NativeSession | None:
        """The files of ``session_id`` in ``home`` (used by capture), or ``None``."""

    @abstractmethod
    def newest_session(self, home: Path, cwd: Path | None = None) -> NativeSession | None:
        """The most recently written session in ``home`` (the one a running harness is in)."""

    @abstractmethod
    def restore_target(self, relpath: PurePosixPath, cwd: Path) -> PurePosixPath | None:
        """Where a captured native file goes in the new home, or ``None`` if it is never restored."""

    def opening_command(self, agent: Sequence[str]) -> list[str]:
        """The original command without its prompt: a reconstructed conversation's first turn is the
        continuation alone, read from standard input (the spec: the transcript is the opening prompt
        after its opening line), never the original prompt with the continuation after it.

        Every flag stays as launched, with its value; only the positional arguments that are not one
        of :attr:`subcommands` (the prompt) are dropped."""
        out = [agent[0]]
        args = list(agent[1:])
        first_positional = True
        i = 0
        while i < len(args):
            arg = args[i]
            if arg == "--":  # everything after it is positional: the prompt
                break
            if arg.startswith("-") and arg != "-":
                out.append(arg)
                if "=" not in arg and arg in self.valued_flags and i + 1 < len(args):
                    out.append(args[i + 1])
                    i += 1
            else:
                if first_positional and arg in self.subcommands:
                    out.append(arg)
                first_positional = False
            i += 1
        return out

    def _kept_flags(self, agent: Sequence[str]) -> list[str]:
        """The original command's flags a resume keeps, in their order: the boolean ones, and the
        valued ones with their value (a valued flag at the very end, without its value, is dropped)."""
        kept: list[str] = []
        args = list(agent[1:])
        i = 0
        while i < len(args):
            arg = args[i]
            flag, joined, _ = arg.partition("=")
            if arg in self.resume_keeps or (joined and flag in self.resume_keeps_valued):
                kept.append(arg)
            elif arg in self.resume_keeps_valued and i + 1 < len(args):
                kept += [arg, args[i + 1]]
                i += 1
            i += 1
        return kept


_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")


def check_session_id(session_id: str) -> str:
    """Refuse a session id that could name a path outside a harness home."""
    if not _ID.fullmatch(session_id):
        raise HarnessError("not a session id")
    return session_id


def safe_relpath(relpath: PurePosixPath) -> bool:
    """True for a relative path with no ``..`` and no empty or absolute part."""
    return not relpath.is_absolute() and all(p not in {"", ".", ".."} for p in relpath.parts)
