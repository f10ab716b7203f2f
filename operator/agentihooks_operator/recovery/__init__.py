"""The recovery core: fences, releases, decisions, replacements and outcomes of one swarm in Redis.

A library with no Kubernetes in it. See ``docs/concepts.md`` for the ideas and
:class:`Recovery` for the entry point.
"""

from .errors import NO_CHECKPOINT, NOT_PENDING, InjectedFault, InvalidInput, LeaseLost, RecoveryRefused
from .launcher import CrashAt, FaultInjector, ReplacementLauncher
from .models import (
    AttemptObservation,
    DecisionResult,
    HandoffCard,
    LaunchPlan,
    PassReport,
    RecoveryEvent,
    Refusal,
)
from .records import FenceRecord, LedgerRow, StoredOutcome
from .recovery import Recovery

__all__ = [
    "NOT_PENDING",
    "NO_CHECKPOINT",
    "AttemptObservation",
    "CrashAt",
    "DecisionResult",
    "FaultInjector",
    "FenceRecord",
    "HandoffCard",
    "InjectedFault",
    "InvalidInput",
    "LaunchPlan",
    "LeaseLost",
    "LedgerRow",
    "PassReport",
    "Recovery",
    "RecoveryEvent",
    "RecoveryRefused",
    "Refusal",
    "ReplacementLauncher",
    "StoredOutcome",
]
