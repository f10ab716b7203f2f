"""The route table: one list that both the aiohttp app and the OpenAPI document are built from."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

from agentihooks_checkpoint.directive import RestoreOutcome
from aiohttp import web
from pydantic import BaseModel

from ..recovery.records import StoredOutcome
from ..swarm import IDENTIFIER
from . import routes_decisions, routes_ops, routes_store, routes_swarms, routes_workers
from .schemas import (
    Accepted,
    DecisionAnswer,
    DecisionRequest,
    KeysAnswer,
    PauseAnswer,
    SeatRequest,
    SessionReport,
    SizeAnswer,
    WatermarkReport,
    WrittenAnswer,
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Auth = Literal["none", "operator", "operator_or_master", "worker"]
Body = type[BaseModel] | Literal["json", "text", "octet", "sse", "json+sse"] | None


@dataclass(frozen=True)
class Param:
    name: str
    schema: dict[str, Any]
    required: bool = False
    description: str = ""


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    handler: Handler
    summary: str
    auth: Auth
    request: Body = None
    responses: dict[int, tuple[str, Body]] = field(default_factory=dict)
    query: tuple[Param, ...] = ()


KEY = Param("key", {"type": "string", "maxLength": 300}, True, "key relative to the worker's scope")
SCOPE = (
    Param("swarm", {"type": "string", "pattern": IDENTIFIER, "maxLength": 128}, True, "the worker's swarm"),
    Param("task_id", {"type": "string", "pattern": IDENTIFIER, "maxLength": 128}, True, "the worker's task"),
    Param(
        "task_generation",
        {"type": "string", "pattern": r"^[1-9][0-9]{0,11}$", "maxLength": 12},
        True,
        "the worker's task generation",
    ),
)
DENIED: dict[int, tuple[str, Body]] = {
    401: ("no bearer token, or a malformed Authorization header", "json"),
    403: ("forbidden_scope: the credential does not grant this", "json"),
}
RETRY: dict[int, tuple[str, Body]] = {
    503: ("Redis is unavailable, or this replica does not hold the lease; retry after Retry-After", "json")
}
#: A worker's routes also answer 503 while its (live) swarm is not published to the API yet.
WORKER_RETRY: dict[int, tuple[str, Body]] = {
    503: (
        "Redis is unavailable, this replica does not hold the lease, or the worker's swarm is not "
        "served yet (swarm_not_published); retry after Retry-After",
        "json",
    )
}
LARGE: dict[int, tuple[str, Body]] = {
    408: ("body_timeout: the body did not arrive within the body timeout (the connection is closed)", "json"),
    413: ("the JSON body is larger than 64 KiB", "json"),
}
SWARM_READ = {**DENIED, 404: ("unknown swarm or seat", "json"), **RETRY}
WORKER = {
    **DENIED,
    400: ("invalid body", "json"),
    409: ("refused by the recovery rules", "json"),
    **LARGE,
    **WORKER_RETRY,
}
STORE = {
    **DENIED,
    400: ("invalid key", "json"),
    503: (
        "no checkpoint store configured, Redis is unavailable, or the worker's swarm is not served "
        "yet (swarm_not_published; retry after Retry-After)",
        "json",
    ),
}

ROUTES: tuple[Route, ...] = (
    Route(
        "GET",
        "/healthz",
        routes_ops.healthz,
        "Liveness: the event loop runs and kopf is up",
        "none",
        responses={200: ("alive", "json"), 503: ("kopf is stopping", "json")},
    ),
    Route(
        "GET",
        "/readyz",
        routes_ops.readyz,
        "Readiness: kopf is up and Redis answers",
        "none",
        responses={200: ("ready", "json"), 503: ("not ready", "json")},
    ),
    Route(
        "GET",
        "/metrics",
        routes_ops.metrics,
        "Prometheus metrics",
        "none",
        responses={200: ("metrics", "text")},
    ),
    Route(
        "GET",
        "/v1/openapi.json",
        routes_ops.openapi,
        "This OpenAPI document",
        "none",
        responses={200: ("the document", "json")},
    ),
    Route(
        "POST",
        "/v1/executions/{execution}/restore-decision",
        routes_decisions.restore_decision,
        "Choose resume or fresh for a fenced attempt",
        "operator_or_master",
        DecisionRequest,
        {
            200: ("accepted now (or the same accepted decision again)", DecisionAnswer),
            202: ("recorded for the lease holder's next pass", DecisionAnswer),
            400: ("invalid body or execution id", "json"),
            **DENIED,
            404: ("unknown execution (operator only)", "json"),
            409: ("refused: not pending, or no checkpoint to resume from", "json"),
            **LARGE,
            **RETRY,
        },
    ),
    Route(
        "POST",
        "/v1/executions/{execution}/outcome",
        routes_workers.outcome,
        "A replacement reports its verified restore outcome",
        "worker",
        RestoreOutcome,
        {200: ("stored (or the same outcome again)", StoredOutcome), **WORKER},
    ),
    Route(
        "POST",
        "/v1/executions/{execution}/session",
        routes_workers.session,
        "Heartbeat: the native session id the attempt holds",
        "worker",
        SessionReport,
        {200: ("recorded", Accepted), **WORKER},
    ),
    Route(
        "POST",
        "/v1/executions/{execution}/watermark",
        routes_workers.watermark,
        "Heartbeat: the last archived transcript record",
        "worker",
        WatermarkReport,
        {200: ("recorded", Accepted), **WORKER},
    ),
    Route(
        "GET",
        "/v1/executions/{execution}/checkpoint-store/object",
        routes_store.read_object,
        "Stream an object of the checkpoint the directive names",
        "worker",
        responses={200: ("the bytes", "octet"), 404: ("no such object", "json"), **STORE},
        query=(KEY, *SCOPE),
    ),
    Route(
        "PUT",
        "/v1/executions/{execution}/checkpoint-store/object",
        routes_store.write_object,
        "Upload an object, manifest or commit pointer into the worker's own scope",
        "worker",
        "octet",
        {
            201: ("written", WrittenAnswer),
            408: ("body_timeout: the upload paused longer than the body timeout", "json"),
            409: ("already committed", "json"),
            413: ("too large", "json"),
            **STORE,
        },
        query=(KEY, *SCOPE, Param("mode", {"type": "string", "enum": ["replace", "once"]})),
    ),
    Route(
        "GET",
        "/v1/executions/{execution}/checkpoint-store/size",
        routes_store.object_size,
        "Size of a readable object (null when absent)",
        "worker",
        responses={200: ("size", SizeAnswer), **STORE},
        query=(KEY, *SCOPE),
    ),
    Route(
        "GET",
        "/v1/executions/{execution}/checkpoint-store/keys",
        routes_store.list_keys,
        "Keys of the named checkpoint",
        "worker",
        responses={200: ("keys", KeysAnswer), **STORE},
        query=(Param("under", {"type": "string", "maxLength": 300}), *SCOPE),
    ),
    Route(
        "GET",
        "/v1/swarms/{swarm}/status",
        routes_swarms.status,
        "Swarm status with handoff cards",
        "operator_or_master",
        responses={200: ("status", "json"), **SWARM_READ},
    ),
    Route(
        "POST",
        "/v1/swarms/{swarm}/pause",
        routes_swarms.pause,
        "Pause restore automation",
        "operator",
        responses={200: ("paused", PauseAnswer), 503: ("lease held elsewhere", "json"), **SWARM_READ},
    ),
    Route(
        "POST",
        "/v1/swarms/{swarm}/unpause",
        routes_swarms.unpause,
        "Resume restore automation",
        "operator",
        responses={200: ("unpaused", PauseAnswer), 503: ("lease held elsewhere", "json"), **SWARM_READ},
    ),
    Route(
        "GET",
        "/v1/swarms/{swarm}/seats/{seat}/checkpoints",
        routes_swarms.checkpoints,
        "Checkpoints of a seat's task",
        "operator_or_master",
        responses={200: ("checkpoints", "json"), **SWARM_READ},
    ),
    Route(
        "POST",
        "/v1/swarms/{swarm}/seats/{seat}/restore-request",
        routes_decisions.restore_request,
        "Record a choice for the seat's waiting attempt (applied on the next pass)",
        "operator_or_master",
        SeatRequest,
        {
            200: ("the same decision was already accepted", DecisionAnswer),
            202: ("recorded", DecisionAnswer),
            400: ("invalid body", "json"),
            **SWARM_READ,
            409: ("refused", "json"),
            **LARGE,
        },
    ),
    Route(
        "GET",
        "/v1/swarms/{swarm}/events",
        routes_swarms.events,
        "Recovery events (JSON), or a Server-Sent Events stream with follow=true",
        "operator_or_master",
        responses={
            200: ("events (JSON), or a stream with follow=true", "json+sse"),
            400: ("bad query", "json"),
            **SWARM_READ,
        },
        query=(
            Param("count", {"type": "integer", "minimum": 1, "maximum": 1000}),
            Param("follow", {"type": "boolean"}),
        ),
    ),
)


@cache
def route_auth() -> dict[str, Auth]:
    """Each route's path template → who may call it, for the authentication middleware.

    Every path has one kind of caller for all its methods; the ledger's data route is registered by
    the ledger package and needs the same credentials as the swarm reads.
    """
    from .routes_held import HELD_ROUTES

    table: dict[str, Auth] = {"/v1/swarms/{swarm}/ledger": "operator_or_master"}
    for route in (*ROUTES, *HELD_ROUTES):
        assert table.setdefault(route.path, route.auth) == route.auth, route.path
    return table
