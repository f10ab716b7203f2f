"""Request and answer bodies of the control API (pydantic), also the source of the OpenAPI schemas."""

from __future__ import annotations

from typing import Annotated, Literal

from agentihooks_checkpoint.catalog import CheckpointSummary
from annotated_types import Ge, Le
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool

from ..recovery.models import HandoffCard, RecoveryEvent

AGENT = r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$"


class _In(BaseModel):
    #: strict: a JSON ``false`` is not a watermark of 0, nor ``1.0`` an integer (what the document says)
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class DecisionRequest(_In):
    choice: Literal["resume", "fresh"]
    #: The master agent the choice is made for (the operator may name anyone; it is recorded as operator).
    agent: str = Field(pattern=AGENT)


class SeatRequest(_In):
    choice: Literal["resume", "fresh"]
    #: Optional for a master (its bound agent is used); when given it must be that agent.
    agent: str | None = Field(default=None, pattern=AGENT)


class SessionReport(_In):
    session_id: str = Field(pattern=AGENT)


def _json_integer(value: object) -> object:
    """A JSON Schema integer: ``412`` or ``412.0``, never ``true`` or ``"412"``."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


#: An integer as JSON Schema counts them (``0.0`` is one; booleans and strings are not).
JsonInt = Annotated[int, BeforeValidator(_json_integer)]


class WatermarkReport(_In):
    watermark: JsonInt = Field(ge=0, le=2**53)
    #: The watermark of the worker's final capture, taken after its harness exited (a drain, an exit).
    final: StrictBool = False


class LeaseRenewal(_In):
    """A worker's lease renewal; the progress it carries is recorded as the session and watermark
    heartbeats would record it (one call instead of three when a report is due). A final watermark
    (after the harness exited) goes to ``/watermark``: the lease no longer matters then."""

    session_id: Annotated[str, Field(pattern=AGENT)] | None = None
    watermark: Annotated[int, Ge(0), Le(2**53), BeforeValidator(_json_integer)] | None = None


class LeaseGranted(BaseModel):
    #: The lease the attempt holds, renewed from now; ``null`` for an attempt launched without one.
    lease_seconds: float | None
    #: When the controller recorded the renewal (ms, the swarm's clock: Redis ``TIME``).
    renewed_at_ms: int


class CredentialExchanged(BaseModel):
    #: The attempt's new worker credential: the one its Pod started with is no longer accepted.
    token: str


class RestoreReport(_In):
    """A worker's restore, for the metrics only: what it got (or that it refused), and how long its boot
    took up to the verified restore. Never part of the recovery rules."""

    result: Literal["native", "reconstructed", "fresh", "refused"]
    #: The refusal reason (a fixed word of the refusal table); counted only with ``refused``.
    reason: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9_]{0,63}$")
    #: Seconds from the worker's boot to its verified restore (or its refusal).
    restore_seconds: float | None = Field(default=None, ge=0, le=86400)


class Problem(BaseModel):
    error: str
    message: str


class DecisionAnswer(BaseModel):
    status: Literal["accepted", "recorded"]
    execution_id: str
    decision: str | None = None
    choice: str | None = None
    checkpoint: str | None = None
    replacement: str | None = None
    directive: dict[str, object] | None = None
    decided_by: str | None = None
    replayed: bool = False
    message: str | None = None


class PauseAnswer(BaseModel):
    swarm: str
    paused: bool


class Accepted(BaseModel):
    accepted: bool = True


class SizeAnswer(BaseModel):
    size: int | None


class KeysAnswer(BaseModel):
    keys: list[str]


class WrittenAnswer(BaseModel):
    key: str
    size: int


# -- answers described for the OpenAPI document (the handlers build the same shapes) ---------------


class Health(BaseModel):
    status: Literal["ok", "stopping"]
    kopf: bool


class Readiness(BaseModel):
    status: Literal["ready", "not ready"]
    kopf: bool
    redis: bool


class SeatState(BaseModel):
    seat: str
    #: The seat's current attempt (``null`` before the first one is admitted).
    execution_id: str | None
    generation: int | None
    task_id: str


class StatusAnswer(BaseModel):
    swarm: str
    #: The Swarm's namespace (a Swarm is its namespace and its name).
    namespace: str
    paused: bool
    lease_held: bool
    compatibility_key: str
    seats: list[SeatState]
    handoffs: list[HandoffCard]


class CheckpointRow(CheckpointSummary):
    #: Complete and captured under the swarm's current compatibility key.
    compatible: bool


class CheckpointsAnswer(BaseModel):
    swarm: str
    seat: str
    task_id: str
    task_generation: int
    compatibility_key: str
    newest_compatible: str | None
    checkpoints: list[CheckpointRow]


class EventsAnswer(BaseModel):
    swarm: str
    events: list[RecoveryEvent]


class LedgerCaller(BaseModel):
    kind: Literal["operator", "master"]
    agent: str | None


class LedgerTaskRow(BaseModel):
    task_id: str
    seat: str
    text: str
    generation: int | None
    task_generation: int | None
    execution_id: str | None
    awaiting: str | None
    recovery_pending: bool


class LedgerCard(HandoffCard):
    awaiting_decision: bool
    recovering: bool


class LedgerAnswer(BaseModel):
    swarm: str
    caller: LedgerCaller
    paused: bool
    automation: bool
    lease_held: bool
    rows: list[LedgerTaskRow]
    cards: list[LedgerCard]


class SwarmRef(BaseModel):
    swarm: str
    namespace: str
    seats: list[str]


class SwarmList(BaseModel):
    #: The swarms this caller may read: every served swarm for the operator, a master's own ones.
    swarms: list[SwarmRef]
