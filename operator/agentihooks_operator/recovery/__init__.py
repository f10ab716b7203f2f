"""The recovery core: fences, releases, decisions, replacements and outcomes of one swarm in Redis.

A library with no Kubernetes in it. See ``docs/concepts.md`` for the ideas and
:class:`Recovery` for the entry point.
"""

from .broker import AccountBroker, HttpBroker, HttpBrokers
from .errors import (
    NO_CHECKPOINT,
    NOT_PENDING,
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
    StepProgress,
)
from .records import FenceRecord, LedgerRow, StoredOutcome
from .recovery import Recovery

__all__ = [
    "NOT_PENDING",
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
    "ReplacementLauncher",
    "ResumeRefused",
    "StepProgress",
    "StoredOutcome",
]
