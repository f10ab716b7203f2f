"""The ``Recovery`` facade: one swarm's recovery state in Redis, driven by the operator and the API.

Nothing here knows about Kubernetes: the operator passes observations in and
implements :class:`~.launcher.ReplacementLauncher`. Every write goes through a
Lua script that checks this controller's lease holder and epoch first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import redis
from agentihooks_checkpoint.catalog import CheckpointCatalog, CheckpointSummary
from agentihooks_checkpoint.directive import RestoreOutcome
from agentihooks_checkpoint.retention import Collected
from agentihooks_checkpoint.scope import StoreScope

from ..swarm import SwarmSpec
from . import cards as _cards
from . import held, outcomes, relaunch, resume, retention, workerlease
from .context import Ctx
from .errors import LeaseLost, RecoveryRefused
from .fanout import InFlight
from .launcher import FaultInjector, ReplacementLauncher, no_faults
from .lease import Lease, LeaseChurn
from .models import (
    AttemptObservation,
    Choice,
    DecisionResult,
    HandoffCard,
    HeldStep,
    LaunchPlan,
    PassReport,
    RecoveryEvent,
    RecoveryProgress,
    RelaunchResult,
)
from .passes import run_one, run_pass
from .steps import choices, credentials, seats
from .steps.broker import BrokerSource
from .store import telemetry
from .store.keys import SwarmKeys
from .store.reads import current_attempts, one
from .store.records import AttemptRecord, FenceRecord, RefusalRecord, StoredOutcome
from .store.seatsmap import SeatsReader
from .store.writer import Writer

log = logging.getLogger("agentihooks.recovery")


class Recovery:
    """Recovery of one swarm under one controller identity (``holder``).

    ``clock`` returns milliseconds; without it, times come from Redis ``TIME``
    inside the scripts. ``faults`` is called at every named write point
    (``before:<step>``/``after:<step>``) and may raise to simulate a crash.
    """

    def __init__(
        self,
        client: redis.Redis,
        swarm: str,
        *,
        holder: str,
        catalog: CheckpointCatalog,
        launcher: ReplacementLauncher,
        prefix: str = "agentihooks",
        lease_ms: int = 15000,
        clock: Callable[[], int] | None = None,
        faults: FaultInjector | None = None,
        brokers: BrokerSource | None = None,
        namespace: str | None = None,
        churn: LeaseChurn | None = None,
    ) -> None:
        if not holder or len(holder) > 200:
            raise ValueError("holder must name this controller (1-200 characters)")
        #: ``namespace`` given: the Swarm's keys carry namespace and name (what the operator uses);
        #: without it, the name-only layout of earlier releases (kept for ``migrate-keys`` and tests).
        self.keys = SwarmKeys(prefix, swarm, namespace)
        self._w = Writer(client, self.keys, holder, clock)
        self._lease = Lease(self._w, lease_ms, churn)
        self._ctx = Ctx(self._w, catalog, launcher, faults or no_faults, clock)
        if brokers is not None:
            self._ctx.brokers = brokers
        self._spec: SwarmSpec | None = None
        #: Attempts a thread of this process is advancing (a pass or :meth:`recover_one`).
        self._inflight = InFlight()
        #: The seat names admitted so far, read again only when seats were admitted (:mod:`.store.seatsmap`).
        self._admitted = seats.Admitted(SeatsReader(client, self.keys, "names"))

    # -- lease -------------------------------------------------------------------------------
    def acquire(self) -> bool:
        """Acquire or renew the swarm's lease; a takeover increments ``control-epoch``."""
        return self._lease.acquire()

    def lease_churn(self) -> tuple[int, int]:
        """(taken, lost): how often the swarm's lease was taken with a new epoch, and lost, by this
        instance and by the earlier ones that shared its ``churn``."""
        return self._lease.churn.taken, self._lease.churn.lost

    def release(self) -> bool:
        """Give the lease up on a clean shutdown."""
        return self._lease.release()

    def lease_holder(self) -> str | None:
        """Who holds the swarm's lease now (``None``: nobody; it expired or was released)."""
        owner = self._lease.owner()
        return owner.owner if owner is not None else None

    def give_up(self) -> bool:
        """Release the lease and never take it again through this instance (the operator is
        stopping, or the Swarm is gone)."""
        return self._lease.retire()

    def load_scripts(self) -> None:
        """Load all Lua scripts now (one round trip); optional, they also load on first use."""
        self._w.preload([self._lease._acquire, self._lease._release])

    @property
    def epoch(self) -> int:
        """The epoch this controller holds (0 before the first successful :meth:`acquire`)."""
        return self._w.epoch

    @property
    def writes_applied(self) -> int:
        """Write scripts that passed the lease guard (for tests and metrics)."""
        return self._w.applied

    @property
    def writes_refused(self) -> int:
        """Write scripts the lease guard refused: nothing of them was applied."""
        return self._w.refused

    @property
    def round_trips(self) -> int:
        """Redis round trips made so far by this instance."""
        return self._w.round_trips

    def _leader(self) -> None:
        if self._w.epoch == 0 and not self.acquire():
            raise LeaseLost(f"{self._w.holder} does not hold the lease of swarm {self.keys.label}")

    # -- passes ------------------------------------------------------------------------------
    def ensure_seats(self, spec: SwarmSpec, *, batch: int = seats.BATCH) -> list[LaunchPlan]:
        """Admit and launch generation 1 for every seat that has no attempt yet.

        Seats are admitted ``batch`` at a time (one script each); the lease is renewed between
        batches and ``LeaseLost`` stops the admission when it is gone.
        """
        self._spec = spec
        self._ctx.follow(spec)
        self._leader()

        def renew() -> None:
            if not self.acquire():
                raise LeaseLost(f"{self._w.holder} lost the lease of swarm {self.keys.label} while admitting")

        return seats.ensure_seats(self._ctx, spec, renew, batch, self._admitted)

    def reconcile(self, spec: SwarmSpec, observations: Sequence[AttemptObservation]) -> PassReport:
        """One recovery pass: fence, release, decide, replace and hold; then apply recorded requests."""
        self._spec = spec
        self._ctx.follow(spec)
        report = PassReport()
        start = self._w.round_trips
        try:
            if not self.acquire():
                log.info(
                    "recovery of swarm %s: lease held by another controller; pass skipped", self.keys.label
                )
                return report
            report.leader, report.epoch = True, self._w.epoch
            run_pass(self._ctx, spec, observations, report, self._inflight)
        except LeaseLost:
            report.lease_lost = True
        finally:
            report.round_trips = self._w.round_trips - start
        return report

    def collect_garbage(self, spec: SwarmSpec) -> Collected | None:
        """One retention run (``spec.retention``), only by the lease holder (``None`` otherwise)."""
        if self._w.epoch == 0 and not self.acquire():
            return None
        return retention.collect_swarm(self._ctx, spec)

    def recover_one(self, spec: SwarmSpec, observation: AttemptObservation) -> PassReport | None:
        """Advance one failed attempt now (its Pod event showed the failure), as a pass would.

        Only while this instance holds the lease (it never takes it here); ``None`` when there was
        nothing to do: not the seat's current attempt, already being advanced by a pass of this
        process, or not the lease holder. Every write is guarded and journaled like a pass's.
        """
        if self._w.epoch == 0:
            return None
        self._spec = spec
        self._ctx.follow(spec)
        report = PassReport(leader=True, epoch=self._w.epoch)
        start = self._w.round_trips
        try:
            if not run_one(self._ctx, spec, observation, report, self._inflight):
                return None
        except LeaseLost:
            report.lease_lost = True
        finally:
            report.round_trips = self._w.round_trips - start
        return report

    # -- decisions ---------------------------------------------------------------------------
    def decide(
        self, execution_id: str, choice: Choice, decided_by: str, *, spec: SwarmSpec | None = None
    ) -> DecisionResult:
        """Accept ``choice`` for the fenced attempt now and launch its replacement.

        ``decided_by`` is ``operator`` or the master's agent name. Raises ``RecoveryRefused`` with
        the spec's exact text. ``spec`` gives the current image tag; without it the last spec this
        instance saw is used, else the tag the seat's attempt was launched with.
        """
        self._leader()
        try:
            return choices.apply_choice(self._ctx, execution_id, choice, decided_by, spec or self._spec)
        except RecoveryRefused as e:
            self._w.run("marks", {"counts": [f"refusals_by_reason:{e.reason}"]})
            raise

    def record_request(self, execution_id: str, choice: Choice, agent: str) -> bool:
        """Store a request for the next pass (the CLI path); False when the same one is already stored."""
        return choices.record_request(self._ctx, execution_id, choice, agent)

    def awaiting_execution(self, seat: str) -> str | None:
        """The fenced attempt of ``seat`` that awaits a decision, if any (for the CLI)."""
        self._w.trip()
        raw = self._w.client.hget(self.keys.seat_handoffs, seat)
        if raw is None:
            return None
        eid = raw.decode() if isinstance(raw, bytes) else str(raw)
        att, _ = one(self._w, eid)
        if att.decision is not None and att.decision.mode == "recovery_pending":
            return eid
        return None

    def current_attempts(self) -> list[AttemptRecord]:
        """Every seat's current attempt that is still admitted (not fenced), sorted by seat.

        One Redis round trip; no lease needed (it only reads).
        """
        return current_attempts(self._w)

    def current_execution(self, seat: str) -> str | None:
        """The seat's current attempt (the newest admitted one), if any."""
        self._w.trip()
        raw = self._w.client.hget(self.keys.seats, seat)
        return None if raw is None else (raw.decode() if isinstance(raw, bytes) else str(raw))

    # -- worker reports ----------------------------------------------------------------------
    def report_outcome(self, execution_id: str, outcome: RestoreOutcome) -> StoredOutcome:
        """Store a replacement's verified restore outcome and write the task's prior ``awaiting`` back."""
        self._leader()
        return outcomes.report_outcome(self._ctx, execution_id, outcome)

    def report_refusal(self, execution_id: str, reason: str, message: str) -> RefusalRecord:
        """A replacement refused its restore: keep its reason and message; the seat waits for a relaunch.

        Its exit is then not a failure to fence; the accepted decision stays as it is.
        """
        self._leader()
        return relaunch.report_refusal(self._ctx, execution_id, reason, message)

    def relaunch(
        self,
        seat: str,
        relaunched_by: str,
        *,
        refused: str | None = None,
        fresh: bool = False,
        spec: SwarmSpec | None = None,
    ) -> RelaunchResult:
        """Launch the refused replacement's directive again as the seat's next generation.

        ``refused`` names the refused attempt (default: the seat's current one); asking again for
        the same refusal answers the same relaunch. Raises ``RecoveryRefused`` (``not_refused``)
        when the seat's current attempt reported no refused restore.
        """
        self._leader()
        try:
            return relaunch.relaunch(
                self._ctx, spec or self._spec, seat, relaunched_by, refused=refused, fresh=fresh
            )
        except RecoveryRefused as e:
            self._w.run("marks", {"counts": [f"refusals_by_reason:{e.reason}"]})
            raise

    def report_session(self, execution_id: str, session_id: str) -> None:
        """Heartbeat: the native session id the attempt holds."""
        self._leader()
        outcomes.heartbeat(self._ctx, execution_id, session_id=session_id, watermark=None)

    def report_watermark(self, execution_id: str, watermark: int, *, final: bool = False) -> None:
        """Heartbeat: the last transcript record known to be archived (``archive_watermark``);
        ``final`` when the worker's final capture (its harness had exited) reached it."""
        self._leader()
        outcomes.heartbeat(self._ctx, execution_id, session_id=None, watermark=watermark, final=final)

    def renew_worker_lease(
        self, execution_id: str, *, session_id: str | None = None, watermark: int | None = None
    ) -> dict[str, int | None]:
        """The worker's lease renewal, with the progress it carries (:mod:`.workerlease`): a fenced
        attempt's renewal is refused (``not_current``)."""
        self._leader()
        return outcomes.heartbeat(
            self._ctx, execution_id, session_id=session_id, watermark=watermark, lease=True
        )

    def confirm_stopped(
        self, seat: str, *, execution_id: str | None = None, by: str = "operator"
    ) -> tuple[FenceRecord, bool]:
        """The operator confirmed that the seat's fenced attempt has stopped (its node is known dead):
        its replacement is launched without waiting for the attempt's worker lease (logged, counted)."""
        self._leader()
        return workerlease.confirm_stopped(self._ctx, seat, execution_id, by)

    # -- worker credentials ------------------------------------------------------------------
    def mint_worker_credential(self, execution_id: str) -> str:
        """A new credential for a current, unfenced attempt; only its sha256 is stored."""
        self._leader()
        return credentials.mint_credential(self._ctx, execution_id)

    def exchange_worker_credential(self, execution_id: str, offered_digest: str) -> str:
        """The worker's one trade of the credential its Pod started with for a new one (see
        :func:`.steps.credentials.exchange_credential`)."""
        self._leader()
        return credentials.exchange_credential(self._ctx, execution_id, offered_digest)

    def check_worker_credential(self, execution_id: str, token: str) -> bool:
        """Constant-time check; False for a fenced attempt (the fence revokes it)."""
        return credentials.check_credential(self._ctx, execution_id, token)

    def check_worker_digest(self, execution_id: str, digest: str) -> bool:
        """:meth:`check_worker_credential` for the credential's sha256 hex (a forwarded request)."""
        return credentials.check_digest(self._ctx, execution_id, digest)

    def fenced_worker_digest(self, execution_id: str, digest: str) -> str | None:
        """The fence reason when ``digest`` is the credential the attempt's fence revoked, else ``None``:
        its worker is told it was fenced (and stops its agent), any other caller learns nothing."""
        return credentials.fenced_reason(self._ctx, execution_id, digest)

    # -- pause -------------------------------------------------------------------------------
    def pause(self) -> None:
        """Every failure from now on waits for an explicit decision (survives restarts)."""
        self._leader()
        self._w.run("pause", {"paused": True})

    def unpause(self) -> None:
        self._leader()
        self._w.run("pause", {"paused": False})

    def paused(self) -> bool:
        self._w.trip()
        return bool(self._w.client.exists(self.keys.recovery_paused))

    # -- observing ---------------------------------------------------------------------------
    def checkpoint_verified(self, scope: StoreScope, checkpoint: CheckpointSummary) -> bool:
        """Whether ``checkpoint``'s objects hash to its record (once per checkpoint, remembered)."""
        assert self._ctx.verifications is not None
        return self._ctx.verifications.verified(scope, checkpoint)

    def cards(self, spec: SwarmSpec) -> list[HandoffCard]:
        """The handoff cards of ``status --json`` and the ledger page."""
        return _cards.cards(self._ctx, spec)

    @property
    def restore_outcomes_by_type(self) -> dict[str, int]:
        """Verified outcomes counted as native, reconstructed and fresh."""
        return telemetry.outcomes_by_type(self._w)

    def metrics(self) -> dict[str, int]:
        """Every counter (``<family>:<label>`` → value) for ``/metrics``."""
        return telemetry.metrics(self._w)

    def events(self, count: int = 100) -> list[RecoveryEvent]:
        """The newest telemetry events, oldest first."""
        return telemetry.events(self._w, count)

    # -- held recoveries ---------------------------------------------------------------------
    def held_recoveries(self) -> list[HeldStep]:
        """Recoveries held at a step that waits for the operator (not expired), oldest first."""
        return [held.view(r) for r in held.live(self._ctx)]

    def held_recovery(self, call: str) -> HeldStep | None:
        rec = held.get(self._ctx, call)
        return held.view(rec) if rec is not None else None

    def issue_resume_token(self, call: str) -> str | None:
        """A new resume token for held recovery ``call`` (returned once; earlier tokens stop working)."""
        self._leader()
        issued = held.issue(self._ctx, call)
        return issued[1] if issued is not None else None

    def resume_recovery(
        self, call: str, token: str, observed: dict[str, str], *, spec: SwarmSpec | None = None
    ) -> RecoveryProgress:
        """Resume a held recovery with the operator's observations; raises ``ResumeRefused``."""
        self._leader()
        return resume.resume(self._ctx, spec or self._spec, call, token, observed, paused=self.paused())
