"""A growing Claude session of one attempt, captured again and again (the segmented-capture tests and
``bench/capture_cost.py``): a worktree, a transcript with a subagent file beside it, and the attempt's
capture state (its chain of segments and the identities of what it sent)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores.base import CheckpointStore
from agentihooks_checkpoint.validator import Validator
from agentihooks_checkpoint.verdict import Verdict
from agentihooks_worker.capture import CaptureRequest, capture
from agentihooks_worker.capture.segments import Chain

from .checkpoints import claude_project_dir, make_repo

SCOPE = StoreScope(swarm="swarm-a", task_id="task-1", task_generation=1)


class GrowingSession:
    """One attempt's worktree and Claude session (a transcript and a subagent file), captured in turn."""

    def __init__(self, store: CheckpointStore, tmp: Path, scope: StoreScope = SCOPE) -> None:
        self.store, self.tmp, self.scope = store, tmp, scope
        self.worktree = tmp / "worktree"
        make_repo(self.worktree, dirty=True)
        self.home = tmp / "home"
        self.session = str(uuid.uuid4())
        folder = self.home / ".claude" / "projects" / claude_project_dir(self.worktree)
        folder.mkdir(parents=True)
        self.transcript = folder / f"{self.session}.jsonl"
        self.extra = folder / self.session / "subagents" / "agent-1.jsonl"
        self.extra.parent.mkdir(parents=True)
        self.extra.write_bytes(b'{"sub": 1}\n')
        self.turns = 0
        self.add_turns(3)
        self.chain = Chain()
        self.known: dict[str, str] = {}
        self.sequence = 0
        self.execution_id = f"exe-{uuid.uuid4().hex}"

    def add_turns(self, n: int, size: int = 300) -> None:
        with self.transcript.open("ab") as f:
            for _ in range(n):
                line = {"type": "user", "n": self.turns, "sessionId": self.session, "pad": "x" * size}
                f.write(json.dumps(line).encode() + b"\n")
                self.turns += 1

    @property
    def native(self) -> list[str]:
        return [p.relative_to(self.home).as_posix() for p in (self.transcript, self.extra)]

    def capture(self, *, segments: bool, on_step: Any = None) -> str:
        self.sequence += 1
        checkpoint_id = f"{self.execution_id}-{self.sequence}"
        req = CaptureRequest(
            scope=self.scope,
            checkpoint_id=checkpoint_id,
            checkpoint_sequence=self.sequence,
            execution_id=self.execution_id,
            execution_generation=1,
            project_id="local:fixture",
            harness="claude",
            compatibility_key="worker:1.0.0",
            transcript=self.transcript,
            watermark=self.turns - 1,
            worktree=self.worktree,
            harness_home=self.home,
            native_files=self.native,
            native_session_id=self.session,
            native_harness_version="2.1.332",
            quiescence_method="partial_capture",
        )
        work = self.tmp / "work"
        work.mkdir(exist_ok=True)
        capture(
            self.store,
            req,
            work_dir=work,
            known=self.known,
            chain=self.chain,
            segments=segments,
            on_step=on_step,
        )
        return checkpoint_id

    def verify(self, checkpoint_id: str, stage: Path | None = None) -> Verdict:
        return Validator().verify(
            self.store,
            self.scope,
            checkpoint_id,
            execution_id=self.execution_id,
            execution_generation=1,
            stage_dir=stage,
        )

    def record(self, checkpoint_id: str) -> dict[str, Any]:
        key, _ = self.store.read_pointer(self.scope, checkpoint_id)
        return dict(json.loads(self.store.read_bytes(self.scope, key, 1 << 20)))
