"""Restore decisions: posted for an execution (applied now, under the lease) or recorded for a seat.

``POST /v1/executions/{execution}/restore-decision`` applies the choice at once
when this replica holds the swarm's lease (200). A replica that does not hold
it records the request for the leader's next pass and answers 202. Refusals
carry the recovery core's exact message with 409.

``POST /v1/swarms/{swarm}/seats/{seat}/restore-request`` is the CLI's path: it
checks what can be known now (the seat waits; resume has a checkpoint; an
identical decision was already accepted) and records the request (202).
"""

from __future__ import annotations

import logging

from aiohttp import web

from ...recovery import DecisionResult, LeaseLost, RecoveryRefused
from ...recovery.errors import NO_CHECKPOINT, NOT_PENDING
from ..access.auth import Caller, is_operator, master_agent
from ..common import (
    answer,
    blocking,
    body_model,
    named_swarm,
    not_a_worker,
    operator_or_master,
    state_of,
    token_digest,
    valid_execution,
)
from ..errors import HttpProblem, forbidden, invalid_execution, not_published, unknown_execution, unknown_seat
from ..refusal_log import REQUEST_EXECUTION
from ..registry import SwarmEntry
from ..schemas import DecisionAnswer, DecisionRequest, SeatRequest

log = logging.getLogger("agentihooks.api")
RECORDED = "recorded; the controller applies it under its lease on its next recovery pass"


def refused(e: RecoveryRefused) -> HttpProblem:
    return HttpProblem(409, e.reason, e.message)


def accepted(result: DecisionResult) -> DecisionAnswer:
    return DecisionAnswer(
        status="accepted",
        execution_id=result.execution_id,
        decision=result.mode,
        choice=result.mode,
        checkpoint=result.checkpoint,
        replacement=result.replacement,
        directive=result.directive.model_dump(mode="json") if result.directive else None,
        decided_by=result.decided_by,
        replayed=result.replayed,
    )


def recorded(execution_id: str, choice: str, decided_by: str) -> DecisionAnswer:
    return DecisionAnswer(
        status="recorded", execution_id=execution_id, choice=choice, decided_by=decided_by, message=RECORDED
    )


async def restore_decision(request: web.Request) -> web.Response:
    state = state_of(request)
    execution = request.match_info["execution"]
    digest = token_digest(request)
    not_a_worker(request)
    body = await body_model(request, DecisionRequest)
    operator = is_operator(digest, state.operator_hash)
    if not valid_execution(execution):
        if operator:
            raise invalid_execution()
        raise forbidden()
    found = await blocking(state.find_execution, execution)
    if found is None:
        if await blocking(state.unpublished_execution, execution):
            raise not_published()  # it exists: this replica has not loaded its swarm yet
        if operator:
            raise unknown_execution()
        raise forbidden()
    entry, _ = found
    if operator:
        caller = Caller("operator")
    else:
        agent = master_agent(digest, entry.masters)
        if agent is None or agent != body.agent:
            raise forbidden()
        caller = Caller("master", agent=agent)
    try:
        result = await blocking(
            entry.recovery.decide, execution, body.choice, caller.decided_by, spec=entry.spec
        )
    except RecoveryRefused as e:  # logged with every other refusal by the refusal_log middleware
        raise refused(e) from e
    except LeaseLost:
        await blocking(entry.recovery.record_request, execution, body.choice, caller.decided_by)
        return answer(recorded(execution, body.choice, caller.decided_by), 202)
    return answer(accepted(result))


def _seat_caller(request: web.Request, entry: SwarmEntry, body: SeatRequest) -> Caller:
    caller = operator_or_master(request, entry)
    if caller.kind == "master" and body.agent is not None and body.agent != caller.agent:
        raise forbidden()
    return caller


async def restore_request(request: web.Request) -> web.Response:
    state = state_of(request)
    entry = state.entry(*named_swarm(request))
    seat = request.match_info["seat"]
    token_digest(request)
    not_a_worker(request)
    body = await body_model(request, SeatRequest)
    caller = _seat_caller(request, entry, body)
    if seat not in {s.name for s in entry.spec.seats}:
        raise unknown_seat()
    execution = await blocking(state.handoff_of, entry, seat)
    if execution is None:
        raise HttpProblem(409, "not_pending", NOT_PENDING)
    request[REQUEST_EXECUTION] = execution  # names it in the refusal line
    decision = await blocking(state.decision, entry, execution)
    if decision is None:
        raise HttpProblem(409, "not_pending", NOT_PENDING)
    if decision.mode != "recovery_pending":
        if decision.mode != body.choice:
            raise HttpProblem(409, "not_pending", NOT_PENDING)
        result = DecisionResult(
            execution_id=execution,
            mode=decision.mode,
            checkpoint=decision.checkpoint,
            replacement=decision.replacement,
            directive=decision.directive,
            decided_by=decision.decided_by,
            replayed=True,
        )
        return answer(accepted(result))
    if body.choice == "resume":
        cards = await blocking(entry.recovery.cards, entry.spec)
        card = next((c for c in cards if c.execution_id == execution), None)
        if card is None or not card.resume_available:
            raise HttpProblem(409, "no_checkpoint", NO_CHECKPOINT)
    await blocking(entry.recovery.record_request, execution, body.choice, caller.decided_by)
    return answer(recorded(execution, body.choice, caller.decided_by), 202)
