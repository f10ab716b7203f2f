"""Held recoveries over HTTP: list them, issue a resume token, resume with an observation.

All three routes are the operator's only. ``POST /v1/recoveries/{call}/resume``
answers the recovery's progress (every step with its status) and, while it is
not finished, a new ``resume_token`` for the same call. Refusals carry the
core's code and HTTP status, and for the two ``observed_*`` codes the steps
concerned with what each accepts (``state.steps``). A resume stopped by an
internal error answers 200 with ``error: resume_failed``. No token is ever
logged; the route handlers never echo the one they were sent.
"""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from ...recovery import HeldStep, RecoveryProgress, ResumeRefused
from ..common import REQUEST_SWARM, answer, blocking, body_model, named_swarm, operator_only, state_of
from ..registry import SwarmEntry
from ..routes import DENIED, LARGE, Body, Route, link
from ..state import ApiState

CALL = re.compile(r"^rc-[0-9a-f]{16}$")
NOT_FOUND = "checkpoint_not_found"


class ResumeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    resume_token: str = Field(min_length=1, max_length=256)
    #: Step path → ``applied`` | ``not_applied`` (checked against the steps; wrong entries are named).
    observed: dict[str, str] = Field(default_factory=dict, max_length=32)


class HeldList(BaseModel):
    swarm: str
    recoveries: list[HeldStep]


class IssuedToken(BaseModel):
    call: str
    #: Returned once; only its SHA-256 is kept. Any earlier token of this call stops working.
    resume_token: str
    expires_at_ms: int


class ResumeProblem(BaseModel):
    error: str
    message: str
    #: For the ``observed_*`` codes: ``{"steps": [{"step", "reason" or "status", "accepts"}]}``.
    state: dict[str, Any] | None = None


GONE = "no held recovery has the call id in the path: it finished, expired, was dropped or is being resumed"


def _gone() -> web.Response:
    return web.json_response({"error": NOT_FOUND, "message": GONE}, status=404)


def _entry_of(state: ApiState, call: str) -> SwarmEntry | None:
    for entry in state.registry.entries():
        if entry.recovery.held_recovery(call) is not None:
            return entry
    return None


def _unechoed(steps: list[dict[str, object]] | None) -> list[dict[str, object]]:
    """The core's per-step refusals without what the caller sent: a key of ``observed`` that is no
    step of the recovery is not named back (entries keep the order of ``observed``), and a value
    that is not accepted is not quoted (``accepts`` lists what is)."""
    out = []
    for step in steps or []:
        entry = dict(step)
        reason = str(entry.get("reason", ""))
        if reason == "no such step":
            entry["step"] = None
        elif reason.startswith("value ") and reason.endswith(" is not accepted"):
            entry["reason"] = "the value is not accepted"
        out.append(entry)
    return out


async def list_held(request: web.Request) -> web.Response:
    operator_only(request)
    entry = state_of(request).entry(*named_swarm(request))
    held = await blocking(entry.recovery.held_recoveries)
    return answer(HeldList(swarm=entry.name, recoveries=held))


async def issue_token(request: web.Request) -> web.Response:
    operator_only(request)
    call = request.match_info["call"]
    entry = await blocking(_entry_of, state_of(request), call) if CALL.fullmatch(call) else None
    if entry is None:
        return _gone()
    request[REQUEST_SWARM] = entry.id  # the lease holder a LeaseLost forwards to
    token = await blocking(entry.recovery.issue_resume_token, call)
    held = await blocking(entry.recovery.held_recovery, call)
    if token is None or held is None:
        return _gone()
    return answer(IssuedToken(call=call, resume_token=token, expires_at_ms=held.expires_at_ms))


async def resume(request: web.Request) -> web.Response:
    operator_only(request)
    call = request.match_info["call"]
    body = await body_model(request, ResumeRequest)
    entry = await blocking(_entry_of, state_of(request), call) if CALL.fullmatch(call) else None
    if entry is None:
        return _gone()
    request[REQUEST_SWARM] = entry.id
    try:
        progress: RecoveryProgress = await blocking(
            entry.recovery.resume_recovery, call, body.resume_token, dict(body.observed), spec=entry.spec
        )
    except ResumeRefused as e:
        # the core's checkpoint_not_found text names the call; the API says which part was wrong instead
        message = GONE if e.code == NOT_FOUND else e.message
        steps = _unechoed(e.steps)
        problem = ResumeProblem(error=e.code, message=message, state={"steps": steps} if steps else None)
        return web.json_response(problem.model_dump(mode="json", exclude_none=True), status=e.status)
    return answer(progress)


_RETRY: dict[int, tuple[str, Body]] = {
    503: ("this replica does not hold the lease, or Redis is down", "json")
}

HELD_ROUTES: tuple[Route, ...] = (
    Route(
        "GET",
        "/v1/swarms/{swarm}/recoveries",
        list_held,
        "Recoveries held at a step that waits for the operator's observation",
        "operator",
        responses={200: ("held recoveries", HeldList), 404: ("unknown swarm", "json"), **DENIED, **_RETRY},
        links={200: {"token": link("issue_token_post", call="$response.body#/recoveries/0/call")}},
    ),
    Route(
        "POST",
        "/v1/recoveries/{call}/token",
        issue_token,
        "Issue a new resume token for a held recovery (earlier tokens stop working)",
        "operator",
        responses={200: ("the token, once", IssuedToken), 404: (NOT_FOUND, "json"), **DENIED, **_RETRY},
        links={200: {"resume": link("resume_post", call="$response.body#/call")}},
    ),
    Route(
        "POST",
        "/v1/recoveries/{call}/resume",
        resume,
        "Resume a held recovery with observations of its unknown or held steps",
        "operator",
        ResumeRequest,
        {
            200: (
                "progress; a new resume_token while unfinished; error resume_failed if it stopped",
                RecoveryProgress,
            ),
            400: ("observed_invalid, observed_required, or an invalid body", ResumeProblem),
            403: ("resume_token_invalid, or forbidden_scope", ResumeProblem),
            404: (NOT_FOUND, ResumeProblem),
            409: ("plan_changed", ResumeProblem),
            401: DENIED[401],
            408: LARGE[408],
            413: LARGE[413],
            **_RETRY,
        },
    ),
)


def setup_held(app: web.Application) -> None:
    """Register the held-recovery routes on the control API's app."""
    for route in HELD_ROUTES:
        app.router.add_route(route.method, route.path, route.handler)
        if (twin := route.namespaced()) is not None:
            app.router.add_route(twin.method, twin.path, twin.handler)
