"""The supervisor's capture hook: checkpoint the running attempt under its own generation.

Each call finds the session the harness is writing (its newest transcript
for the worktree, or the natively restored session when that one is newer: a
resumed Codex rollout keeps the old attempt's ``cwd`` in its ``session_meta``,
so no cwd match finds it), and captures that transcript, its native files (only when
the installed harness is qualified for native resume) and the worktree's
source. Before the harness has written anything, a restored attempt captures
the transcript it was restored from, so a replacement that dies early is
itself recoverable. Nothing to capture yet (no transcript, no repository)
returns ``None``; a real failure raises.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from agentihooks_checkpoint.errors import CaptureError, CheckpointExists
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores.base import CheckpointStore

from .attempt import AttemptLayout
from .capture import CaptureRequest, capture
from .capture.segments import Chain
from .childenv import child_env
from .harness import Harness, NativeSession
from .report import emit, event_line
from .supervisor import CaptureResult, CaptureWhen
from .transcripts import count_records

log = logging.getLogger(__name__)
#: The captures that send segments (:mod:`.capture.segments`); the first and the periodic ones are whole,
#: so a record any swarm v2 reader can restore is never older than the capture interval.
SEGMENTED_WHEN = frozenset({"event", "final"})


@dataclass
class LiveCapture:
    """Callable capture hook bound to one attempt."""

    store: CheckpointStore
    scope: StoreScope
    layout: AttemptLayout
    harness: Harness
    execution_id: str
    execution_generation: int
    project_id: str
    compatibility_key: str
    base_commit: str | None
    next_sequence: int
    #: Installed harness version when it is qualified for native resume, else ``None``.
    native_version: str | None
    restored_transcript: Path | None = None
    restored_watermark: int | None = None
    #: The session a native restore reopened (the harness goes on writing it).
    restored_session_id: str | None = None
    taken: list[str] = field(default_factory=list)
    #: What the last committed capture saw; a periodic capture of the same state is skipped.
    last_fingerprint: str | None = None
    #: Objects this attempt uploaded and verified, with their stored identity: not sent again unchanged.
    uploaded: dict[str, str] = field(default_factory=dict)
    #: What the captures stored of the transcript: an event or final capture sends only what it gained.
    chain: Chain = field(default_factory=Chain)

    def __call__(self, when: CaptureWhen) -> CaptureResult | None:
        if not (self.layout.worktree / ".git").exists():
            return None
        session = self._current_session()
        native_files: list[str] = []
        session_id: str | None = None
        if session is not None:
            transcript = self.layout.harness_home / session.transcript
            session_id = session.session_id
            if self.native_version is not None:
                native_files = [
                    (self.layout.harness_home / f).relative_to(self.layout.home).as_posix()
                    for f in session.files
                ]
        elif self.restored_transcript is not None and self.restored_watermark is not None:
            transcript = self.restored_transcript
        else:
            return None
        # The fingerprint is taken before the records are counted: whatever the harness writes after it
        # changes the next fingerprint, so a later capture is never skipped as "unchanged" while its
        # records are past this capture's watermark (the other order lost the last turns of a burst).
        home_files = [self.layout.home / f for f in native_files] or [transcript]
        fingerprint = _fingerprint(home_files, self.layout.worktree)
        if when in ("periodic", "event") and fingerprint == self.last_fingerprint:
            return None  # nothing changed since the last checkpoint
        if session is not None:
            watermark = count_records(transcript) - 1
        else:
            assert self.restored_watermark is not None
            watermark = self.restored_watermark
        if watermark < 0:
            return None
        result = self._commit(when, transcript, watermark, session_id, native_files)
        self.last_fingerprint = fingerprint
        return result

    def signature(self) -> object:
        """A cheap look at the session the harness writes (each file's size and time): what the
        triggers' file-change watch compares, every floor interval."""
        session = self._current_session()
        if session is None:
            return None
        home = self.layout.harness_home
        out = []
        for f in session.files:
            st = (home / f).stat()
            out.append((str(f), st.st_size, st.st_mtime_ns))
        return tuple(out)

    def _current_session(self) -> NativeSession | None:
        """The newest session for the worktree, or the restored one when it was written more recently."""
        home, worktree = self.layout.harness_home, self.layout.worktree
        found = self.harness.newest_session(home, worktree)
        if self.restored_session_id is None:
            return found
        restored = self.harness.find_session(home, self.restored_session_id, worktree)
        if restored is None or (found is not None and _mtime(home, found) > _mtime(home, restored)):
            return found
        return restored

    def _commit(
        self, when: CaptureWhen, transcript: Path, watermark: int, session_id: str | None, native: list[str]
    ) -> CaptureResult:
        for _ in range(3):
            checkpoint_id = f"{self.execution_id}-{self.next_sequence}"
            req = CaptureRequest(
                scope=self.scope,
                checkpoint_id=checkpoint_id,
                checkpoint_sequence=self.next_sequence,
                execution_id=self.execution_id,
                execution_generation=self.execution_generation,
                project_id=self.project_id,
                harness=self.harness.name,  # type: ignore[arg-type]
                compatibility_key=self.compatibility_key,
                transcript=transcript,
                watermark=watermark,
                worktree=self.layout.worktree,
                base_commit=self.base_commit,
                harness_home=self.layout.home if native else None,
                native_files=native,
                native_session_id=session_id if native else None,
                native_harness_version=self.native_version if native else None,
                # a periodic capture copies files the running harness may be appending to
                quiescence_method="partial_capture" if when in ("periodic", "event") else "stopped_process",
            )
            self.next_sequence += 1
            try:
                capture(
                    self.store,
                    req,
                    work_dir=self.layout.tmp,
                    known=self.uploaded,
                    chain=self.chain,
                    segments=when in SEGMENTED_WHEN,
                )
            except CaptureError as e:
                if isinstance(e.__cause__, CheckpointExists):
                    continue
                raise
            self.taken.append(checkpoint_id)
            emit(
                event_line(
                    "checkpoint_committed",
                    execution_id=self.execution_id,
                    checkpoint_id=checkpoint_id,
                    when=when,
                    native=bool(native),
                    watermark=watermark,
                )
            )
            return CaptureResult(checkpoint_id=checkpoint_id, session_id=session_id, watermark=watermark)
        raise CheckpointExists("could not find a free checkpoint id")


def _mtime(home: Path, session: NativeSession) -> int:
    return (home / session.transcript).stat().st_mtime_ns


def _fingerprint(files: list[Path], worktree: Path) -> str:
    """Sizes and times of the session files, plus HEAD and every changed path of the worktree."""
    h = hashlib.sha256()
    for f in files:
        st = f.stat()
        h.update(f"{f}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    env = child_env(GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    for args in (["rev-parse", "HEAD"], ["status", "--porcelain=v1", "-z", "--untracked-files=all"]):
        out = subprocess.run(["git", "-C", str(worktree), *args], capture_output=True, env=env, check=False)
        h.update(out.stdout + b"\1")
        if args[0] == "status":
            for entry in out.stdout.split(b"\0"):
                path = worktree / os.fsdecode(entry[3:] if len(entry) > 3 else entry)
                if entry and path.is_file():
                    st = path.stat()
                    h.update(f"{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()
