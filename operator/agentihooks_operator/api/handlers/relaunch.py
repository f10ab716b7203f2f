"""A refused restore, and the relaunch after its cause was fixed.

``POST /v1/executions/{execution}/restore-refusal`` is a replacement's own
report, with its worker credential, that it refused its restore (the reason
and message of its ``restore_refused`` line), sent before it exits: the seat's
decision stays accepted, the exit is not fenced, and the card says ``restore
refused: REASON`` with the fix hint.

``POST /v1/swarms/{swarm}/seats/{seat}/relaunch`` is what ``agentihooks swarm
NAME relaunch SEAT`` and the ledger's Relaunch control call once the operator
fixed the cause: the refused replacement's directive is launched again as the
seat's next generation, under the lease (a replica without it answers ``503
not_leader``). Asking again for the same refused attempt answers the same
relaunch (``replayed``).
"""

from __future__ import annotations

from typing import Literal

from agentihooks_checkpoint.reasons import NO_STORE_MESSAGE, REASON_CAP
from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

from ...recovery import RecoveryRefused
from ...recovery.models import EXECUTION_ID
from ...recovery.relaunch import reason_ok
from ...recovery.store.records import RefusalRecord
from ..common import (
    answer,
    blocking,
    body_model,
    named_swarm,
    not_a_worker,
    operator_only,
    operator_or_master,
    state_of,
    worker_of,
)
from ..errors import HttpProblem, forbidden, unknown_seat
from ..refusal_log import REQUEST_EXECUTION

AGENT = r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$"


class RestoreRefusalReport(BaseModel):
    """The refusal a replacement logged (``restore_refused``), reported before it exits."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    execution_id: str = Field(pattern=EXECUTION_ID)
    #: The refusal's reason as the spec's table writes it: a token (``version_changed``,
    #: ``corrupt_object``, ...), ``source: <what could not be applied>``, or ``no checkpoint store is
    #: configured for this worker``.
    reason: str = Field(min_length=1, max_length=REASON_CAP)

    @field_validator("reason")
    @classmethod
    def _spec_reason(cls, value: str) -> str:
        if not reason_ok(value):
            raise ValueError(
                "reason must be a refusal token (lower-case letters, digits, _), 'source: <what>' "
                f"(printable, at most {REASON_CAP} characters) or {NO_STORE_MESSAGE!r}"
            )
        return value

    #: The refusal's message (the spec's wording; kept to 500 characters, control characters removed).
    message: str = Field(max_length=2000)


class RestoreRefusalAnswer(BaseModel):
    """The refusal as stored (the first report; a repeat answers it again)."""

    execution_id: str
    seat: str
    generation: int
    reason: str
    message: str
    reported_at_ms: int
    relaunched_as: str | None = None


class RelaunchRequest(BaseModel):
    """Relaunch the seat's refused replacement; every field is optional."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: The refused attempt meant (as the card names it); default: the seat's current attempt.
    execution_id: str | None = Field(default=None, pattern=EXECUTION_ID)
    #: Start the next generation fresh instead of with the refused directive (a checkpoint that
    #: cannot be repaired).
    fresh: StrictBool = False
    #: For a master: its bound agent (naming another one is refused).
    agent: str | None = Field(default=None, pattern=AGENT)


class RelaunchAnswer(BaseModel):
    status: Literal["relaunched"] = "relaunched"
    seat: str
    #: The attempt that refused its restore.
    refused: str
    #: The seat's next generation, launched with the same directive.
    replacement: str
    generation: int
    directive: dict[str, object] | None = None
    #: The refusal reason that was fixed.
    reason: str
    relaunched_by: str | None = None
    #: True when this refusal had been relaunched before: the same relaunch, nothing new admitted.
    replayed: bool = False


def _stored(r: RefusalRecord) -> RestoreRefusalAnswer:
    return RestoreRefusalAnswer(
        execution_id=r.execution_id,
        seat=r.seat,
        generation=r.generation,
        reason=r.reason,
        message=r.message,
        reported_at_ms=r.reported_at_ms,
        relaunched_as=r.relaunched_as,
    )


async def restore_refusal(request: web.Request) -> web.Response:
    execution = request.match_info["execution"]
    entry, _ = await worker_of(request, execution)
    body = await body_model(request, RestoreRefusalReport)
    if body.execution_id != execution:
        raise HttpProblem(409, "not_own", "a refusal is accepted only from the replacement's own execution")
    try:
        stored = await blocking(entry.recovery.report_refusal, execution, body.reason, body.message)
    except RecoveryRefused as e:
        raise HttpProblem(409, e.reason, e.message) from e
    return answer(_stored(stored))


class ConfirmStoppedRequest(BaseModel):
    """The operator's word that a fenced attempt has stopped; every field is optional."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: The fenced attempt meant (as the card names it); default: the seat's last fenced attempt.
    execution_id: str | None = Field(default=None, pattern=EXECUTION_ID)


class ConfirmStoppedAnswer(BaseModel):
    status: Literal["confirmed"] = "confirmed"
    seat: str
    execution_id: str
    #: When its replacement would have been launched without this (ms, the swarm's clock).
    waited_until_ms: int | None = None
    confirmed_at_ms: int | None = None
    #: True when this was confirmed before: nothing changed.
    replayed: bool = False


async def confirm_stopped(request: web.Request) -> web.Response:
    """The operator confirms a fenced attempt has stopped (``kubectl delete pod --force``'s
    counterpart): its replacement no longer waits for the attempt's worker lease."""
    state = state_of(request)
    entry = state.entry(*named_swarm(request))
    seat = request.match_info["seat"]
    operator_only(request)
    body = await body_model(request, ConfirmStoppedRequest)
    if seat not in {s.name for s in entry.spec.seats}:
        raise unknown_seat()
    if body.execution_id is not None:
        request[REQUEST_EXECUTION] = body.execution_id
    try:
        fence, replayed = await blocking(
            entry.recovery.confirm_stopped, seat, execution_id=body.execution_id, by="operator"
        )
    except RecoveryRefused as e:
        raise HttpProblem(409, e.reason, e.message) from e
    return answer(
        ConfirmStoppedAnswer(
            seat=seat,
            execution_id=fence.execution_id,
            waited_until_ms=fence.waited_until_ms,
            confirmed_at_ms=fence.stop_confirmed_at_ms,
            replayed=replayed,
        )
    )


async def relaunch(request: web.Request) -> web.Response:
    state = state_of(request)
    entry = state.entry(*named_swarm(request))
    seat = request.match_info["seat"]
    not_a_worker(request)
    caller = operator_or_master(request, entry)  # the scope before the body: a 403 says nothing about it
    body = await body_model(request, RelaunchRequest)
    if caller.kind == "master" and body.agent is not None and body.agent != caller.agent:
        raise forbidden()
    if seat not in {s.name for s in entry.spec.seats}:
        raise unknown_seat()
    current = await blocking(state.current_of, entry, seat)
    named = body.execution_id or (current.execution_id if current is not None else None)
    if named is not None:
        request[REQUEST_EXECUTION] = named  # names it in the refusal line
    try:
        result = await blocking(
            entry.recovery.relaunch,
            seat,
            caller.decided_by,
            refused=body.execution_id,
            fresh=body.fresh,
            spec=entry.spec,
        )
    except RecoveryRefused as e:
        raise HttpProblem(409, e.reason, e.message) from e
    return answer(
        RelaunchAnswer(
            seat=result.seat,
            refused=result.refused,
            replacement=result.replacement,
            generation=result.generation,
            directive=result.directive.model_dump(mode="json") if result.directive else None,
            reason=result.reason,
            relaunched_by=result.relaunched_by,
            replayed=result.replayed,
        )
    )
