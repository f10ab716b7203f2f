"""The recovery core: fences, releases, decisions, replacements and outcomes of one swarm in Redis.

A library with no Kubernetes in it. See ``docs/concepts.md`` for the ideas and
:class:`Recovery` for the entry point.
"""

from .errors import (
    NO_CHECKPOINT,
    NOT_PENDING,
    NOT_REFUSED,
    InjectedFault,
    InvalidInput,
    LaunchBlocked,
    LeaseLost,
    RecoveryRefused,
    ResumeRefused,
)
from .launcher import CrashAt, FaultInjector, ReplacementLauncher
from .models import (
    AttemptObservation,
    DecisionResult,
    HandoffCard,
    HeldStep,
    LaunchPlan,
    PassReport,
    RecoveryEvent,
    RecoveryProgress,
    Refusal,
    RelaunchResult,
    StepProgress,
)
from .recovery import Recovery
from .steps.broker import AccountBroker, HttpBroker, HttpBrokers
from .store.records import FenceRecord, LedgerRow, RefusalRecord, StoredOutcome

__all__ = [
    "NOT_PENDING",
    "NOT_REFUSED",
    "NO_CHECKPOINT",
    "AccountBroker",
    "AttemptObservation",
    "CrashAt",
    "DecisionResult",
    "FaultInjector",
    "FenceRecord",
    "HandoffCard",
    "HeldStep",
    "HttpBroker",
    "HttpBrokers",
    "InjectedFault",
    "InvalidInput",
    "LaunchBlocked",
    "LaunchPlan",
    "LeaseLost",
    "LedgerRow",
    "PassReport",
    "Recovery",
    "RecoveryEvent",
    "RecoveryProgress",
    "RecoveryRefused",
    "Refusal",
    "RefusalRecord",
    "RelaunchResult",
    "ReplacementLauncher",
    "ResumeRefused",
    "StepProgress",
    "StoredOutcome",
]
