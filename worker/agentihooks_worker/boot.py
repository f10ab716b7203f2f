"""``agentihooks-worker boot``: everything between the Pod starting and the harness's first turn.

1. read the launch record (a disagreeing directive is refused as malformed);
2. prepare the attempt folder and the task worktree (and copy the provider credential's files,
   if the Pod mounts any, into the harness home);
3. mark Claude Code's onboarding done and the worktree trusted;
4. pick the checkpoint store;
5-9. the Restorer: verify, project check, native files and version, source, continuation;
10. report the outcome to the controller (every launch naming a control URL, whatever its store:
    the session and archive watermark too, so a fence knows what a checkpoint covers) and log one
    ``restore_verified`` line; report the
    restore (result and duration) for the controller's metrics, best effort;
11. take a first capture under this attempt's own generation, then supervise the harness.

A refusal exits 64 with a ``restore_refused`` line naming the reason (and, best effort, a restore
report of ``refused/<reason>`` to the controller's metrics); any other failure exits 70. Nothing falls
back to a weaker continuity.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agentihooks_checkpoint.errors import CheckpointError, StoreUnreachable
from agentihooks_checkpoint.launch import LaunchRecord, is_identifier
from agentihooks_checkpoint.reasons import Reason
from agentihooks_checkpoint.stores.base import CheckpointStore
from agentihooks_checkpoint.stores.remote import ControlRefused, ControlReporter
from agentihooks_checkpoint.validator import Validator

from . import capture_policy, logs, provider_files
from .attempt import AttemptLayout
from .attempt_state import AttemptState
from .attribution import attributed
from .childenv import TOKEN_ENV, take_token
from .errors import EXIT_FAILURE, EXIT_FENCED, EXIT_REFUSED, Refused, WorkerError
from .harness import Harness, harness_for
from .launch import read_launch_record
from .lease import WorkerLease, is_fenced
from .live_capture import LiveCapture
from .onboarding import mark_onboarded
from .report import OutcomeReporter, RestoreReporter, emit, event_line, restore_verified_line
from .restorer import Restored, Restorer, RestoreRequest
from .settings import WorkerSettings
from .source import project_remote
from .store_open import control_reporter, open_store
from .supervisor import Supervisor

log = logging.getLogger(__name__)


@dataclass
class BootContext:
    """What the steps before the supervisor produced (kept for tests and the capture hook)."""

    launch: LaunchRecord
    layout: AttemptLayout
    harness: Harness
    env: dict[str, str]
    store: CheckpointStore | None
    restored: Restored


class Boot:
    """One worker boot. ``run()`` returns the process exit code."""

    def __init__(
        self,
        settings: WorkerSettings,
        *,
        environ: Mapping[str, str] | None = None,
        restorer: Restorer | None = None,
        reporter: OutcomeReporter | None = None,
    ) -> None:
        self.settings = settings
        self.environ = environ
        # The credential lives in memory only: out of os.environ, so no child (git, the harness) gets it.
        self._token = (os.environ if environ is None else environ).get(TOKEN_ENV)
        if environ is None:
            take_token(os.environ)
        self.restorer = restorer or Restorer(Validator(archive_limits=settings.archive_limits))
        self.reporter = reporter
        self.context: BootContext | None = None
        self.capture_hook: LiveCapture | None = None
        self._execution_id: str | None = None
        #: The launch record, once read (a refused replacement reports its refusal to its controller).
        self._launch: LaunchRecord | None = None
        #: (session id, watermark) the first capture reported, so the supervisor only reports changes.
        self.initial_progress: tuple[str | None, int | None] = (None, None)
        #: When this boot started (monotonic): a restore's duration is measured from here.
        self._started = time.monotonic()

    def _exchange(self, launch: LaunchRecord) -> None:
        """Trade the credential the Pod started with (every process of the container has it, the
        image's init too) for one only this process holds; the first one then matches nothing."""
        if not launch.credential_exchange or not launch.control_url or not self._token:
            return
        trade = ControlReporter(
            launch.control_url,
            launch.authority.execution_id,
            self._token,
            retry_seconds=self.settings.control_retry_seconds,
        )
        try:
            self._token = trade.exchange_credential()
        except ControlRefused as e:
            raise WorkerError(f"the controller refused the credential exchange ({e.code})") from e
        except CheckpointError as e:
            raise WorkerError("the credential exchange failed: the controller cannot be reached") from e

    def _credentialed(self) -> dict[str, str]:
        """The environment the store and the reporter are opened from: with the credential."""
        base = dict(os.environ if self.environ is None else self.environ)
        if self._token:
            base[TOKEN_ENV] = self._token
        return base

    def run(self) -> int:
        try:
            ctx = self.prepare()
        except Refused as r:
            if not r.counted:
                self.restorer.metrics.refused(r.reason)
            fields = {"reason": r.spec_reason, "message": r.message, "detail": r.detail}
            emit(event_line("restore_refused", execution_id=self._execution_id, **fields))
            if r.reason != Reason.STORE_UNREACHABLE.value:  # the controller is known to be away
                self._report_restore("refused", reason=r.reason, seconds=time.monotonic() - self._started)
            self._report_refusal(r)  # last: the controller ends this attempt's credential with it
            return EXIT_REFUSED
        except WorkerError as e:
            emit(event_line("boot_failed", execution_id=self._execution_id, error=str(e)))
            return EXIT_FAILURE
        except Exception as e:
            log.exception("boot failed")
            emit(event_line("boot_failed", execution_id=self._execution_id, error=type(e).__name__))
            return EXIT_FAILURE
        return self.supervise(ctx)

    def prepare(self) -> BootContext:
        """Steps 1-10 and the first capture; raises :class:`Refused` or :class:`WorkerError`."""
        launch = read_launch_record(self.settings.launch_record)
        self._launch = launch
        harness = harness_for(launch.harness)
        a = launch.authority
        self._execution_id = a.execution_id
        logs.identify(
            swarm=a.swarm_id, namespace=launch.store_namespace, seat=a.seat_id, execution_id=a.execution_id
        )
        layout = AttemptLayout(self.settings.attempts_dir, a.execution_id, harness.name, a.task_id)
        layout.create()
        provider_files.install(self.settings.provider_files, layout)  # before anything runs the harness
        env = attributed(layout.environment(self.environ), a.execution_id)
        if launch.restore is None or launch.restore.checkpoint_id is None:
            self._clone_fresh(launch, layout)
        if harness.name == "claude":
            mark_onboarded(layout.claude_config_dir / ".claude.json", layout.worktree)
        self.capture_policy = capture_policy.policy_of(self.settings, launch)
        capture_policy.prepare(self.capture_policy, harness.name, layout, env)
        self._exchange(launch)  # before the store, the reports or the harness use the credential
        environ = self._credentialed()
        store = open_store(self.settings, launch, environ)
        if self.reporter is None:  # any launch that names its controller reports to it, whatever its store
            self.reporter = control_reporter(launch, environ, self.settings)
        state = AttemptState(layout.root / "run")
        restored = state.load()
        seconds: float | None = None  # known only when this boot ran the restore
        if restored is None:
            try:
                restored = self.restorer.restore(
                    RestoreRequest(launch, layout, harness, store, env, self.settings.project_remotes)
                )
            finally:
                self._write_metrics(layout)
            seconds = time.monotonic() - self._started
            state.save(restored)
            self.restorer.on_step("restored")
        # A first launch (no directive) is no restore: the controller accepts outcomes only from replacements.
        reportable = self.reporter is not None and launch.restore is not None
        if reportable and self.reporter is not None and not state.done("reported"):
            self._report_outcome(self.reporter, restored)
            state.mark("reported")
        if reportable and not state.done("restore_reported"):
            self._report_restore(restored.outcome.recovery.value, seconds=seconds)
            state.mark("restore_reported")
        if launch.restore is not None and not state.done("logged"):
            emit(restore_verified_line(restored.outcome))
            state.mark("logged")
            self.restorer.on_step("logged")
        ctx = BootContext(launch, layout, harness, env, store, restored)
        self.context = ctx
        self.capture_hook = self._capture_hook(ctx)
        if (
            self.capture_hook is not None
            and restored.record is not None
            and not state.done("initial_capture")
        ):
            self._initial_capture(ctx, self.capture_hook, state)
        return ctx

    def _report_restore(self, result: str, *, reason: str | None = None, seconds: float | None) -> None:
        """Tell the controller's metrics how the restore went (best effort: a failure changes nothing)."""
        if not isinstance(self.reporter, RestoreReporter):
            return
        if not self.reporter.report_restore(result, reason=reason, restore_seconds=seconds):
            log.info("the restore report for the controller's metrics was not counted")

    def _report_refusal(self, r: Refused) -> None:
        """A replacement tells its controller it refused, before it exits (whatever its store).

        The controller then keeps the seat's accepted decision and waits for the operator to fix the
        cause and relaunch, instead of fencing the exit as a new failure. Retried like every call to
        the controller; a report that cannot be made is logged and changes nothing else.
        """
        launch = self._launch
        if launch is None or launch.restore is None or not launch.control_url:
            return
        eid = launch.authority.execution_id
        reporter = self.reporter
        if reporter is None:
            try:
                environ = self._credentialed()
                reporter = self.reporter = control_reporter(launch, environ, self.settings)
            except (Refused, CheckpointError):  # no credential to report with
                return
            if reporter is None:
                return
        send = getattr(reporter, "report_refusal", None)
        if send is None:
            return
        try:
            send(eid, r.spec_reason, r.message)
        except CheckpointError as e:
            code = e.code if isinstance(e, ControlRefused) else type(e).__name__
            emit(event_line("refusal_report_failed", execution_id=eid, error=code))
            return
        emit(event_line("refusal_reported", execution_id=eid, reason=r.spec_reason))

    @staticmethod
    def _report_outcome(reporter: OutcomeReporter, restored: Restored) -> None:
        """Tell the controller what continuity was delivered; a refusal stops the launch."""
        try:
            reporter.report_outcome(restored.outcome)
        except StoreUnreachable as e:  # retried until the deadline; the harness must not start unrecorded
            raise Refused(
                Reason.STORE_UNREACHABLE.value,
                "the controller could not be reached to record the restore outcome",
                detail="retried until the control retry deadline",
            ) from e
        except ControlRefused as e:
            if 400 <= e.status < 500:
                raise Refused(
                    "outcome_refused", f"the controller refused the restore outcome ({e.code})"
                ) from e
            raise WorkerError(f"reporting the restore outcome failed ({e.status})") from e
        except CheckpointError as e:
            raise WorkerError("reporting the restore outcome failed: the controller cannot be reached") from e

    def _initial_capture(self, ctx: BootContext, hook: LiveCapture, state: AttemptState) -> None:
        """One capture under this attempt's generation right after the restore (once per attempt)."""
        a = ctx.launch.authority
        mine = hook.store.list_checkpoints(hook.scope, execution_id=a.execution_id)
        if mine:  # an earlier boot of this attempt committed it and crashed before noting so
            state.mark("initial_capture", mine[0].checkpoint_id)
            return
        try:
            result = hook("initial")
        except Exception as e:  # the harness still starts; periodic captures retry
            error = type(e).__name__
            emit(event_line("capture_failed", execution_id=a.execution_id, when="initial", error=error))
            return
        self.restorer.on_step("initial_capture")
        state.mark("initial_capture", result.checkpoint_id if result else True)
        if result is not None:
            self.initial_progress = (result.session_id, result.watermark)
            if self.reporter is not None:
                try:
                    self.reporter.report_progress(a.execution_id, result.session_id, result.watermark)
                except CheckpointError as e:
                    emit(
                        event_line(
                            "progress_report_failed", execution_id=a.execution_id, error=type(e).__name__
                        )
                    )

    def supervise(self, ctx: BootContext) -> int:
        """Step 11: run the harness under the supervisor."""
        a = ctx.launch.authority

        lease = self._lease(ctx)

        def progress(session_id: str | None, watermark: int | None, final: bool) -> None:
            if lease is not None and self.reporter is not None and not final:
                # one call: the renewal carries the progress that is due (it also counts as a renewal)
                renew = self.reporter.renew_lease  # type: ignore[attr-defined]
                lease.renew_with(lambda: renew(session_id=session_id, watermark=watermark))
            elif self.reporter is not None:
                self.reporter.report_progress(a.execution_id, session_id, watermark, final=final)

        if lease is not None:
            try:
                lease.acquire(self.settings.control_retry_seconds)  # the harness runs only under a lease
            except Exception as e:
                code = EXIT_FENCED if is_fenced(e) else EXIT_FAILURE
                reason = "fenced" if code == EXIT_FENCED else "lease_not_acquired"
                emit(
                    event_line(
                        "agent_stopped", execution_id=a.execution_id, reason=reason, error=type(e).__name__
                    )
                )
                return code
        argv = ctx.restored.argv
        if self.capture_policy.continuous:
            argv = ctx.harness.with_capture_hook(argv, ctx.layout.harness_home)
        sup = Supervisor(
            argv,
            env=ctx.env,
            cwd=ctx.layout.worktree,
            stdin_file=ctx.restored.stdin,
            capture=self.capture_hook,
            on_progress=progress,
            kill_seconds=ctx.launch.kill_seconds,
            lease=lease,
            triggers=capture_policy.triggers_for(self.capture_policy, ctx.layout, self.capture_hook),
            progress_floor=self.capture_policy.progress_floor,
        )
        sup.last_reported = (*self.initial_progress, False)
        code = sup.run()
        if sup.halted is not None:
            emit(event_line("agent_stopped", execution_id=a.execution_id, reason=sup.halted, exit_code=code))
        else:
            emit(event_line("harness_exited", execution_id=a.execution_id, exit_code=code))
        return code

    def _lease(self, ctx: BootContext) -> WorkerLease | None:
        """The attempt's worker lease, when its launch record has one and a controller to renew it with."""
        launch = ctx.launch
        seconds = launch.worker_lease_seconds
        renew = getattr(self.reporter, "renew_lease", None)
        if seconds is None or not launch.control_url or renew is None:
            return None
        return WorkerLease(renew, duration=seconds, stop_budget=min(launch.kill_seconds, seconds / 4))

    def _capture_hook(self, ctx: BootContext) -> LiveCapture | None:
        reg = ctx.launch.registration
        if ctx.store is None or reg is None:
            return None
        a = ctx.launch.authority
        if not is_identifier(a.task_id):  # the original's ``:``/``/`` task ids: no manifest can name them
            emit(event_line("capture_unavailable", execution_id=a.execution_id, reason="task_id"))
            return None
        scope = ctx.launch.store_scope()
        assert scope is not None  # a registration is there (checked above)
        record = ctx.restored.record
        existing = [s.checkpoint_sequence for s in ctx.store.list_checkpoints(scope)]
        version = ctx.restored.harness_version
        if version is None:
            version = _qualified_version(ctx.harness, ctx.launch.agent[0], ctx.env)
        return LiveCapture(
            store=ctx.store,
            scope=scope,
            layout=ctx.layout,
            harness=ctx.harness,
            execution_id=a.execution_id,
            execution_generation=a.generation,
            project_id=record.authority.project_id if record else reg.projects[0],
            compatibility_key=reg.compatibility_key,
            base_commit=record.base_commit if record else _head(ctx.layout.worktree),
            next_sequence=max(existing, default=-1) + 1,
            native_version=version,
            restored_transcript=ctx.restored.transcript,
            restored_watermark=record.watermark if record else None,
            restored_session_id=ctx.restored.outcome.session_id,
        )

    def _clone_fresh(self, launch: LaunchRecord, layout: AttemptLayout) -> None:
        """Prepare the checkout of a launch without a checkpoint: clone the project into an empty worktree."""
        reg = launch.registration
        if reg is None or (layout.worktree / ".git").exists() or any(layout.worktree.iterdir()):
            return
        remote = project_remote(reg.projects[0], self.settings.project_remotes)
        if remote is None:
            return
        done = subprocess.run(
            ["git", "clone", "-q", remote, str(layout.worktree)], capture_output=True, check=False
        )
        if done.returncode != 0:
            raise WorkerError("preparing the checkout failed: the project could not be cloned")

    def _write_metrics(self, layout: AttemptLayout) -> None:
        try:
            self.restorer.metrics.write_textfile(layout.root / "run" / "metrics.prom")
        except OSError as e:
            log.warning("could not write restore metrics: %s", e.strerror)


def _head(worktree: Path) -> str | None:
    done = subprocess.run(["git", "-C", str(worktree), "rev-parse", "HEAD"], capture_output=True, check=False)
    return done.stdout.decode().strip() if done.returncode == 0 else None


def _qualified_version(harness: Harness, executable: str, env: Mapping[str, str]) -> str | None:
    try:
        version = harness.installed_version(executable, env)
    except WorkerError:
        return None
    return str(version) if harness.is_qualified(version) else None
