"""The records the recovery core stores in Redis, as pydantic models.

Names follow the original swarm v2 records (fence, decision, ``control-owner``,
heartbeats) and add, optionally, what this package needs: attempt records,
grants, ledger task rows, stored outcomes and journal entries. Every record is
JSON in a Redis hash field; Lua scripts write them, Python reads them here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from agentihooks_checkpoint.directive import Continuity, RestoreDirective, parse_directive
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field


def _list(v: Any) -> Any:
    # Lua's cjson writes an empty array as ``{}``; read it back as a list.
    return [] if v == {} else v


def _directive(v: Any) -> Any:
    # A stored directive whose fields disagree is refused as malformed on read, as everywhere.
    if v is None or isinstance(v, RestoreDirective):
        return v
    return parse_directive(v)


#: A directive read from a record, validated with the shared contract's rules.
StoredDirective = Annotated[RestoreDirective | None, BeforeValidator(_directive)]

StepName = Literal[
    "fence", "hold", "release_grant", "release_account", "retire", "decide", "launch", "outcome"
]
StepStatus = Literal["ok", "unknown", "failed", "held", "skipped"]
DecisionMode = Literal["resume", "fresh", "recovery_pending"]
RECOVERY_PENDING = "recovery_pending"


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class ControlOwner(_Record):
    """``control-owner``: who holds the swarm's lease, under which epoch, until when (ms)."""

    owner: str
    epoch: int
    expires_at: int


class Heartbeat(_Record):
    """``heartbeats[execution_id]``: the last accepted heartbeat of an attempt."""

    session_id: str | None = None
    archive_watermark: int | None = None
    at_ms: int | None = None
    #: The watermark of the worker's final capture, taken after its harness had exited: nothing the
    #: attempt wrote lies past it.
    final_watermark: int | None = None
    #: The last renewal of the worker lease (swarm clock) and the lease it renewed, in ms.
    lease_at_ms: int | None = None
    lease_ms: int | None = None


class RestoreSource(_Record):
    execution_id: str
    execution_generation: int


class AttemptRecord(_Record):
    """``attempt-records[execution_id]``: one attempt of a seat (the original's ``executions`` differ)."""

    execution_id: str
    seat: str
    generation: int
    task_id: str
    task_generation: int
    grant_id: str
    #: ``relaunched``: the attempt refused its restore and the operator relaunched its seat; it holds
    #: no authority any more and was never fenced (it failed nothing of the task).
    state: Literal["admitted", "fenced", "relaunched"] = "admitted"
    compatibility_key: str
    task_text: str
    directive: StoredDirective = None
    restore_from: RestoreSource | None = None
    admitted_at_ms: int
    epoch: int
    #: The refused attempt this one relaunches (same directive, next generation).
    relaunch_of: str | None = None
    #: The fenced attempt whose decision this replacement carries out (its ``attempt-recoveries``
    #: entry); kept by relaunches. ``None`` for a first attempt, and for records written before it.
    replaces: str | None = None
    #: The namespace its checkpoint scope lives under: the Swarm's for a task generation begun by
    #: this release, ``None`` (name-only store layout) for one begun before; a replacement keeps
    #: its predecessor's, so a lineage never changes layout half-way.
    store_namespace: str | None = None
    #: The worker lease this attempt was launched with (ms); ``None``: launched without one (an
    #: earlier release), so its worker never renews and nothing waits for it.
    worker_lease_ms: int | None = None


class FenceRecord(_Record):
    """``attempt-fences[execution_id]``: written once; ``released`` fills in order grant, account."""

    execution_id: str
    generation: int
    seat: str
    reason: str
    controller_epoch: int
    fenced_at_ms: int
    native_session: str | None = None
    archive_watermark: int | None = None
    tail: str
    #: The attempt's final capture covered its whole transcript: the lost tail is empty.
    final_capture: bool = False
    released: Annotated[list[Literal["grant", "account"]], BeforeValidator(_list)] = Field(
        default_factory=list
    )
    superseded_legacy: bool = False
    task_id: str | None = None
    #: Set while a release step is held: ``{"step", "call", "since_ms"}`` (cleared when it is resolved).
    held: dict[str, Any] | None = None
    #: How the account release was known to have happened: ``built-in``, ``confirmed``, ``observed``
    #: (the controller asked the broker) or ``reported`` (the operator answered ``applied``).
    account_release: str | None = None
    #: Its death was not proven and its worker held a lease: no replacement runs before this time
    #: (swarm clock, ms), when the old worker has stopped its agent at the latest (:mod:`..workerlease`).
    old_attempt_stops_by_ms: int | None = None
    #: The operator confirmed the attempt stopped (its node known dead): when, by whom, and the lease
    #: wait it ended (``old_attempt_stops_by_ms`` is cleared then).
    stop_confirmed_at_ms: int | None = None
    stop_confirmed_by: str | None = None
    waited_until_ms: int | None = None


class DecisionRecord(_Record):
    """``attempt-recoveries[execution_id]``: how the fenced attempt's seat returns."""

    execution_id: str
    generation: int
    reason: str
    mode: DecisionMode
    checkpoint: str | None = None
    replacement: str | None = None
    directive: StoredDirective = None
    decided_by: str | None = None
    decided_at_ms: int | None = None
    controller_epoch: int | None = None
    #: The choice that was accepted, kept when a fresh relaunch rewrites ``mode``: repeating it still
    #: answers the decision as it stands (the spec: a repeated accepted choice returns the decision).
    accepted_choice: Literal["resume", "fresh"] | None = None


class GrantRecord(_Record):
    """``launch-grants[execution_id]``: the attempt's authority to run; revoked by the fence."""

    grant_id: str
    seat: str
    generation: int
    state: Literal["active", "revoked"]


class StoredOutcome(_Record):
    """``restore-outcomes[execution_id]``: a verified restore outcome of a replacement."""

    execution_id: str
    recovery: Continuity
    checkpoint_id: str | None = None
    session_id: str | None = None
    watermark: int | None = None
    #: The fence's archive watermark, kept beside the restored one.
    archive_watermark: int | None = None
    restored_from: str
    status: Literal["verified"] = "verified"
    reported_at_ms: int


class RefusalRecord(_Record):
    """``restore-refusals[execution_id]``: the restore refusal a replacement reported before it exited.

    A refused replacement is not fenced: its seat's accepted decision stays as it is until the operator
    fixes the cause and relaunches (``relaunched_as`` then names the next generation).
    """

    execution_id: str
    seat: str
    generation: int
    reason: str
    message: str
    reported_at_ms: int = 0
    epoch: int = 0
    relaunched_as: str | None = None
    relaunched_at_ms: int | None = None
    relaunched_by: str | None = None


class LedgerRow(_Record):
    """``ledger-tasks[task_id]``: the task as the ledger shows it."""

    task_id: str
    seat: str
    text: str
    task_generation: int
    awaiting: str | None = None
    #: The accepted directive (``status: accepted``), then the verified outcome.
    recovery: dict[str, Any] | None = None
    #: True while recovery holds the task; ``held_awaiting`` is the value written back.
    held: bool = False
    held_awaiting: str | None = None
    restores: int = 0


class JournalEntry(_Record):
    status: StepStatus
    epoch: int
    at_ms: int
    #: An ``unknown`` launch the launcher could not send yet: why (never a credential), a fixed word,
    #: since when (ms; the first pass that saw this reason), how many tries were refused and when
    #: the controller that last tried means to try again (ms; :mod:`..steps.launchwait`).
    detail: str | None = None
    reason: str | None = None
    since_ms: int | None = None
    tries: int | None = None
    retry_at_ms: int | None = None
    #: Set when a blocked launch is sent again (cleared by the next refusal): the send's outcome is
    #: unknown, so its Secret found without its Pod means the launch took effect.
    inflight: bool | None = None


class HeldRecovery(_Record):
    """``held-recoveries[call]``: a recovery stopped at a step only the operator can answer.

    Holds the SHA-256 hex of the current resume token, never the token.
    ``state`` is ``resuming`` while one resume request owns it.
    """

    call: str
    execution_id: str
    seat: str
    step: StepName
    since_ms: int
    expires_at_ms: int
    token_hash: str
    plan: str
    seq: int
    state: Literal["held", "resuming"] = "held"


class RecoveryRequest(_Record):
    """``recovery-requests["<execution_id>|<choice>"]``: what the CLI recorded."""

    execution_id: str
    choice: Literal["resume", "fresh"]
    agent: str
    recorded_at_ms: int | None = None
    #: Orders requests recorded within the same millisecond.
    recorded_ns: int | None = None
