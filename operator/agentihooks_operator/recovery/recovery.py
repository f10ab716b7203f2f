"""The ``Recovery`` facade: one swarm's recovery state in Redis, driven by the operator and the API.

Nothing here knows about Kubernetes: the operator passes observations in and
implements :class:`~.launcher.ReplacementLauncher`. Every write goes through a
Lua script that checks this controller's lease holder and epoch first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import redis
from agentihooks_checkpoint.catalog import CheckpointCatalog
from agentihooks_checkpoint.directive import RestoreOutcome

from ..swarm import SwarmSpec
from .launcher import FaultInjector, ReplacementLauncher
from .models import (
    AttemptObservation,
    Choice,
    DecisionResult,
    HandoffCard,
    LaunchPlan,
    PassReport,
    RecoveryEvent,
)
from .records import StoredOutcome


class Recovery:
    """Recovery of one swarm under one controller identity (``holder``)."""

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
    ) -> None:
        raise NotImplementedError

    # -- lease -------------------------------------------------------------------------------
    def acquire(self) -> bool:
        """Acquire or renew the swarm's lease; a takeover increments ``control-epoch``."""
        raise NotImplementedError

    @property
    def epoch(self) -> int:
        """The epoch this controller holds (0 before the first successful :meth:`acquire`)."""
        raise NotImplementedError

    # -- passes ------------------------------------------------------------------------------
    def ensure_seats(self, spec: SwarmSpec) -> list[LaunchPlan]:
        """Admit and launch generation 1 for every seat that has no attempt yet."""
        raise NotImplementedError

    def reconcile(self, spec: SwarmSpec, observations: Sequence[AttemptObservation]) -> PassReport:
        """One recovery pass: fence, release, decide, replace and hold; then apply recorded requests."""
        raise NotImplementedError

    # -- decisions ---------------------------------------------------------------------------
    def decide(
        self, execution_id: str, choice: Choice, decided_by: str, *, spec: SwarmSpec | None = None
    ) -> DecisionResult:
        """Accept ``choice`` for the fenced attempt now and launch its replacement.

        ``decided_by`` is ``operator`` or the master's agent name. Raises ``RecoveryRefused`` with
        the spec's exact text. ``spec`` gives the current image tag; without it the last spec this
        instance saw is used, else the tag the seat's attempt was launched with.
        """
        raise NotImplementedError

    def record_request(self, execution_id: str, choice: Choice, agent: str) -> bool:
        """Store a request for the next pass (the CLI path); False when the same one is already stored."""
        raise NotImplementedError

    def awaiting_execution(self, seat: str) -> str | None:
        """The fenced attempt of ``seat`` that awaits a decision, if any (for the CLI)."""
        raise NotImplementedError

    # -- worker reports ----------------------------------------------------------------------
    def report_outcome(self, execution_id: str, outcome: RestoreOutcome) -> StoredOutcome:
        """Store a replacement's verified restore outcome and write the task's prior ``awaiting`` back."""
        raise NotImplementedError

    def report_session(self, execution_id: str, session_id: str) -> None:
        """Heartbeat: the native session id the attempt holds."""
        raise NotImplementedError

    def report_watermark(self, execution_id: str, watermark: int) -> None:
        """Heartbeat: the last transcript record known to be archived (``archive_watermark``)."""
        raise NotImplementedError

    # -- worker credentials ------------------------------------------------------------------
    def mint_worker_credential(self, execution_id: str) -> str:
        """A new credential for a current, unfenced attempt; only its sha256 is stored."""
        raise NotImplementedError

    def check_worker_credential(self, execution_id: str, token: str) -> bool:
        """Constant-time check; False for a fenced attempt (the fence revokes it)."""
        raise NotImplementedError

    # -- pause -------------------------------------------------------------------------------
    def pause(self) -> None:
        raise NotImplementedError

    def unpause(self) -> None:
        raise NotImplementedError

    def paused(self) -> bool:
        raise NotImplementedError

    # -- observing ---------------------------------------------------------------------------
    def cards(self, spec: SwarmSpec) -> list[HandoffCard]:
        """The handoff cards of ``status --json`` and the ledger page."""
        raise NotImplementedError

    @property
    def restore_outcomes_by_type(self) -> dict[str, int]:
        """Verified outcomes counted as native, reconstructed and fresh."""
        raise NotImplementedError

    def metrics(self) -> dict[str, int]:
        """Every counter (``<family>:<label>`` → value) for ``/metrics``."""
        raise NotImplementedError

    def events(self, count: int = 100) -> list[RecoveryEvent]:
        """The newest telemetry events, oldest first."""
        raise NotImplementedError
