"""The Restorer: verify the directive's checkpoint and lay it down, or refuse with a reason.

Order (each step only runs when the one before it passed):

1. a checkpoint needs a store (``no checkpoint store is configured for this worker``);
2. ``Validator.verify`` against the fenced attempt's registration, staging the
   verified bytes in the attempt's ``tmp/`` (archives as their member files):
   only those bytes are applied, moved into place rather than copied;
3. the checkpoint's project must be one of the registration's projects;
4. native: the record must be native and hold the directive's session; its
   files land in the harness home, then the harness version is checked —
   all before the worktree is touched;
5. source: bundle, patch and untracked files into the worktree;
6. reconstructed: ``continuation.txt`` becomes the opening prompt; native: the
   resume command, with ``resume-prompt.txt`` as its next turn.

Every refusal is counted under ``refused/<reason>``; every delivered restore
under its continuity type.
"""

from __future__ import annotations

import shutil
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from agentihooks_checkpoint.archive import ArchiveRefused
from agentihooks_checkpoint.directive import Continuity, RestoreDirective, RestoreOutcome
from agentihooks_checkpoint.errors import StoreError, StoreUnreachable
from agentihooks_checkpoint.launch import LaunchRecord, is_identifier
from agentihooks_checkpoint.layout import pointer_key
from agentihooks_checkpoint.model import CheckpointRecord, Role
from agentihooks_checkpoint.reasons import Reason
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores.base import CheckpointStore
from agentihooks_checkpoint.stores.remote import ControlRefused, RemoteStore
from agentihooks_checkpoint.validator import Validator
from agentihooks_checkpoint.verdict import StagedCheckpoint

from .attempt import AttemptLayout
from .continuation import prompt_delivery, write_continuation, write_resume_prompt
from .errors import Refused
from .harness import Harness
from .metrics import RestoreMetrics
from .native import place_native, restore_native
from .source import apply_source, project_remote, reset_partial
from .store_select import require_store
from .versions import check_native_version


@dataclass(frozen=True)
class RestoreRequest:
    """Everything one restore needs."""

    launch: LaunchRecord
    layout: AttemptLayout
    harness: Harness
    store: CheckpointStore | None
    env: Mapping[str, str]
    remotes: Mapping[str, str]


@dataclass(frozen=True)
class Restored:
    """What was delivered, and how the supervisor should start the harness."""

    outcome: RestoreOutcome
    record: CheckpointRecord | None
    argv: list[str]
    stdin: Path | None = None
    #: The conversation transcript now on disk (native file or archived copy), for the first capture.
    transcript: Path | None = None
    harness_version: str | None = None


def refusal(reason: Reason, detail: str = "") -> Refused:
    return Refused(reason.value, detail=detail)


class Restorer:
    """Runs restores and counts them (:attr:`metrics`)."""

    def __init__(
        self, validator: Validator | None = None, on_step: Callable[[str], None] | None = None
    ) -> None:
        self.validator = validator or Validator()
        self.metrics = RestoreMetrics()
        #: Called after each step that wrote something (tests crash the restore there).
        self.on_step = on_step or (lambda _step: None)
        self._cleanups: list[threading.Thread] = []

    def restore(self, req: RestoreRequest) -> Restored:
        """Deliver the launch record's directive or raise :class:`Refused`."""
        directive = req.launch.restore or RestoreDirective(recovery=Continuity.FRESH)
        try:
            restored = self._restore(req, directive)
        except Refused as r:
            self.metrics.refused(r.reason)
            r.counted = True
            raise
        if req.launch.restore is not None:  # a first launch restores nothing and is not counted
            self.metrics.outcome(restored.outcome.recovery.value)
        return restored

    def _restore(self, req: RestoreRequest, directive: RestoreDirective) -> Restored:
        authority = req.launch.authority
        if directive.recovery is Continuity.FRESH:
            outcome = RestoreOutcome(execution_id=authority.execution_id, recovery=Continuity.FRESH)
            return Restored(outcome=outcome, record=None, argv=list(req.launch.agent))
        store = require_store(req.store)
        registration, source = req.launch.registration, req.launch.restore_from
        assert registration is not None and source is not None and directive.checkpoint_id is not None
        if not is_identifier(authority.task_id):  # the original's ``:``/``/`` ids scope no checkpoint
            raise refusal(Reason.SCOPE_MISMATCH, "the task id cannot name a checkpoint scope")
        scope = req.launch.store_scope()
        assert scope is not None  # a registration is there (checked above)
        _check_credential(store, scope, directive.checkpoint_id)
        stage = req.layout.tmp / "restore-stage"
        shutil.rmtree(stage, ignore_errors=True)
        try:
            verdict = self.validator.verify(
                store,
                scope,
                directive.checkpoint_id,
                execution_id=source.execution_id,
                execution_generation=source.execution_generation,
                stage_dir=stage,
                unpack_archives=True,
            )
            if verdict.reason is not None:
                raise refusal(verdict.reason, verdict.detail or "the checkpoint did not verify")
            self.on_step("verified")
            record, staged = verdict.record, verdict.staged
            assert record is not None and staged is not None
            if record.authority.project_id not in registration.projects:
                raise refusal(
                    Reason.SCOPE_MISMATCH, "the checkpoint's project is not registered for this worker"
                )
            return self._apply(req, directive, record, staged)
        finally:
            self._discard(stage)

    def _discard(self, stage: Path) -> None:
        """Remove the stage folder in the background: freeing its space need not delay the harness."""
        if not stage.exists():
            return
        trash = stage.with_name(f"{stage.name}.discard-{uuid.uuid4().hex[:8]}")
        stage.rename(trash)
        worker = threading.Thread(target=shutil.rmtree, args=(trash, True), name="stage-cleanup", daemon=True)
        worker.start()
        self._cleanups.append(worker)

    def wait_cleanup(self) -> None:
        """Wait for background removals (tests and benchmarks)."""
        for worker in self._cleanups:
            worker.join()
        self._cleanups.clear()

    def _apply(
        self,
        req: RestoreRequest,
        directive: RestoreDirective,
        record: CheckpointRecord,
        staged: StagedCheckpoint,
    ) -> Restored:
        layout, harness, agent = req.layout, req.harness, list(req.launch.agent)
        native = directive.recovery is Continuity.NATIVE
        version: str | None = None
        transcript: Path | None = None
        if native:
            transcript, version = self._native(req, directive, record, staged)
            self.on_step("native")
        remote = project_remote(record.authority.project_id, req.remotes)
        marker = layout.root / "run" / "source.started"

        def before_write() -> None:
            if marker.exists():
                reset_partial(layout.worktree)
            marker.touch(mode=0o600)

        apply_source(record, staged, layout.worktree, remote, before_write)
        self.on_step("source")
        stdin: Path | None = None
        if native:
            assert directive.session_id is not None
            argv = harness.resume_command(agent, directive.session_id)
            stdin = write_resume_prompt(layout.resume_prompt)  # the CLIs reopen a session only with a prompt
        else:
            archived = staged.get(Role.TRANSCRIPT.value)
            if archived is None:
                raise refusal(Reason.MISSING_MATERIAL, "the checkpoint has no transcript")
            with archived.path.open("rb") as f:
                write_continuation(layout.continuation, iter(lambda: f.read(1 << 20), b""))
            transcript = layout.root / "run" / "transcript.jsonl"
            archived.path.replace(transcript)
            argv, stdin = prompt_delivery(req.harness, agent, layout.continuation)
            self.on_step("continuation")
        outcome = RestoreOutcome(
            execution_id=req.launch.authority.execution_id,
            recovery=directive.recovery,
            checkpoint_id=record.checkpoint_id,
            session_id=directive.session_id if native else None,
            watermark=record.watermark,
        )
        return Restored(outcome, record, argv, stdin, transcript, version)

    def _native(
        self,
        req: RestoreRequest,
        directive: RestoreDirective,
        record: CheckpointRecord,
        staged: StagedCheckpoint,
    ) -> tuple[Path, str]:
        harness, layout = req.harness, req.layout
        archive = staged.get(Role.NATIVE_SESSION.value)
        if not record.native or archive is None:
            raise refusal(Reason.CONTEXT_ONLY, "the checkpoint supports context continuation only")
        if record.native_session_id != directive.session_id:
            raise refusal(Reason.CONVERSATION_MISMATCH, "the checkpoint holds another native session")
        if record.harness is not None and record.harness != harness.name:
            raise refusal(Reason.CONVERSATION_MISMATCH, "the checkpoint's session belongs to another harness")
        try:
            if archive.members is not None:  # staged unpacked: its verified files move into place
                place_native(archive.members, harness, layout.harness_home, layout.worktree)
            else:
                restore_native(archive.path, harness, layout.harness_home, layout.worktree)
        except ArchiveRefused as e:
            raise refusal(Reason.CONVERSATION_MISMATCH, "the native archive holds no usable session") from e
        assert directive.session_id is not None
        session = harness.find_session(layout.harness_home, directive.session_id, layout.worktree)
        if session is None:
            raise refusal(Reason.CONVERSATION_MISMATCH, "the directive's session is not in the native files")
        version = check_native_version(harness, req.launch.agent[0], req.env, record.native_harness_version)
        return layout.harness_home / session.transcript, version


def _check_credential(store: CheckpointStore, scope: StoreScope, checkpoint_id: str) -> None:
    """Through the controller, tell a refused credential apart from a missing checkpoint."""
    if not isinstance(store, RemoteStore):
        return
    try:
        store.size_of(scope, pointer_key(checkpoint_id))
    except StoreUnreachable as e:  # already retried until the deadline: do not wait all over again
        raise refusal(Reason.STORE_UNREACHABLE, "the controller did not answer in time") from e
    except ControlRefused as e:
        if e.status in (401, 403):
            raise Refused("forbidden_scope", detail="the controller refused this worker's credential") from e
    except StoreError:
        return  # another failure: the verification that follows names it
