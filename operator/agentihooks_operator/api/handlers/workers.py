"""What a worker reports: its restore outcome, the heartbeats the fence reads, and its restore for the
metrics (``restore-report``: counted by the replica that receives it, never a recovery input).

Only the execution's own live worker credential is accepted; a fenced
attempt's credential is revoked by the fence, so it is refused at once (403).
The recovery core's rules decide the rest (409 with its message).
"""

from __future__ import annotations

from agentihooks_checkpoint.directive import RestoreOutcome
from aiohttp import web

from ...recovery import RecoveryRefused
from ..common import answer, blocking, body_model, state_of, token_digest, worker_of
from ..errors import HttpProblem, fenced
from ..schemas import (
    Accepted,
    CredentialExchanged,
    LeaseGranted,
    LeaseRenewal,
    RestoreReport,
    SessionReport,
    WatermarkReport,
)


async def outcome(request: web.Request) -> web.Response:
    execution = request.match_info["execution"]
    entry, _ = await worker_of(request, execution)
    body = await body_model(request, RestoreOutcome)
    try:
        stored = await blocking(entry.recovery.report_outcome, execution, body)
    except RecoveryRefused as e:
        raise HttpProblem(409, e.reason, e.message) from e
    return answer(stored)


async def session(request: web.Request) -> web.Response:
    execution = request.match_info["execution"]
    entry, _ = await worker_of(request, execution)
    body = await body_model(request, SessionReport)
    try:
        await blocking(entry.recovery.report_session, execution, body.session_id)
    except RecoveryRefused as e:
        raise HttpProblem(409, e.reason, e.message) from e
    return answer(Accepted())


async def watermark(request: web.Request) -> web.Response:
    execution = request.match_info["execution"]
    entry, _ = await worker_of(request, execution)
    body = await body_model(request, WatermarkReport)
    try:
        await blocking(entry.recovery.report_watermark, execution, body.watermark, final=body.final)
    except RecoveryRefused as e:
        raise HttpProblem(409, e.reason, e.message) from e
    return answer(Accepted())


async def lease(request: web.Request) -> web.Response:
    """Renew the attempt's worker lease (and record the progress it carries). A renewal that reaches a
    fenced attempt is answered ``410 fenced`` like its revoked credential: its worker stops its agent."""
    execution = request.match_info["execution"]
    entry, _ = await worker_of(request, execution)
    body = await body_model(request, LeaseRenewal)
    try:
        got = await blocking(
            entry.recovery.renew_worker_lease, execution, session_id=body.session_id, watermark=body.watermark
        )
    except RecoveryRefused as e:
        if e.reason == "not_current":
            raise fenced(e.message) from e
        raise HttpProblem(409, e.reason, e.message) from e
    ms = got.get("lease_ms")
    return answer(
        LeaseGranted(lease_seconds=ms / 1000 if ms else None, renewed_at_ms=int(got["renewed_at_ms"] or 0))
    )


async def credential(request: web.Request) -> web.Response:
    """Trade the credential the worker's Pod started with for a new one, once, before the harness runs:
    every process of the container (its init included) was started with the first one, which then
    matches nothing. The answer holds a secret: never cached, never logged."""
    execution = request.match_info["execution"]
    entry, _ = await worker_of(request, execution)
    try:
        token = await blocking(entry.recovery.exchange_worker_credential, execution, token_digest(request))
    except RecoveryRefused as e:
        if e.reason == "not_current":
            raise fenced(e.message) from e
        raise HttpProblem(409, e.reason, e.message) from e
    response = answer(CredentialExchanged(token=token))
    response.headers["Cache-Control"] = "no-store"
    return response


async def restore_report(request: web.Request) -> web.Response:
    """Count the worker's restore (result, refusal reason, duration) in this replica's metrics, once per
    execution; no lease needed, nothing in Redis changes."""
    execution = request.match_info["execution"]
    entry, _ = await worker_of(request, execution)
    body = await body_model(request, RestoreReport)
    state_of(request).metrics.worker_report(
        entry.id, execution, body.result, body.reason, body.restore_seconds
    )
    return answer(Accepted())
