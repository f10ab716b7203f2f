"""The route table: one list that both the aiohttp app and the OpenAPI document are built from."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any, Literal

from agentihooks_checkpoint.directive import RestoreOutcome
from agentihooks_checkpoint.scope import NAMESPACE
from aiohttp import web
from pydantic import BaseModel

from ..recovery.models import RecoveryEvent
from ..recovery.store.records import StoredOutcome
from ..swarm import IDENTIFIER
from .handlers import decisions, ops, relaunch, store, swarms, workers
from .handlers.relaunch import (
    ConfirmStoppedAnswer,
    ConfirmStoppedRequest,
    RelaunchAnswer,
    RelaunchRequest,
    RestoreRefusalAnswer,
    RestoreRefusalReport,
)
from .schemas import (
    Accepted,
    CheckpointsAnswer,
    CredentialExchanged,
    DecisionAnswer,
    DecisionRequest,
    EventsAnswer,
    Health,
    KeysAnswer,
    LeaseGranted,
    LeaseRenewal,
    LedgerAnswer,
    PauseAnswer,
    Readiness,
    RestoreReport,
    SeatRequest,
    SessionReport,
    SizeAnswer,
    StatusAnswer,
    SwarmList,
    WatermarkReport,
    WrittenAnswer,
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Auth = Literal["none", "operator", "operator_or_master", "worker"]


@dataclass(frozen=True)
class EventStream:
    """An answer that is ``answer`` as JSON, or (``follow=true``) a Server-Sent Events stream whose
    events carry one ``event`` as JSON in their ``data`` line."""

    answer: type[BaseModel]
    event: type[BaseModel]


Body = type[BaseModel] | EventStream | Literal["json", "metrics", "octet"] | None


@dataclass(frozen=True)
class Param:
    name: str
    schema: dict[str, Any]
    required: bool = False
    description: str = ""
    #: The ``error`` code of a 400 for a value that does not match ``schema``.
    code: str = "invalid_request"


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
    #: OpenAPI links of a success answer: ``status → {name: link object}`` (the stateful tests follow them).
    links: dict[int, dict[str, dict[str, Any]]] = field(default_factory=dict)

    @property
    def operation_id(self) -> str:
        scoped = "_namespaced" if self.path.startswith(NAMESPACED) else ""
        return self.handler.__name__ + scoped + "_" + self.method.lower()

    def namespaced(self) -> Route | None:
        """The same route under ``/v1/namespaces/{namespace}/swarms/{swarm}`` (``None`` when it names
        no swarm); its links keep to the namespaced routes."""
        if not self.path.startswith(NAME_ONLY):
            return None
        links = {
            status: {name: _scoped_link(target) for name, target in named.items()}
            for status, named in self.links.items()
        }
        return replace(self, path=NAMESPACED + self.path[len(NAME_ONLY) :], links=links)


#: A per-swarm route's two forms: by name alone (unambiguous only) and by namespace and name.
NAME_ONLY = "/v1/swarms/{swarm}"
NAMESPACED = "/v1/namespaces/{namespace}/swarms/{swarm}"
NAMESPACE_EXPR = "$request.path.namespace"


def _scoped_link(target: dict[str, Any]) -> dict[str, Any]:
    """A link of a namespaced route: to the namespaced twin when it names a swarm, else as it is."""
    if "swarm" not in target["parameters"]:
        return target
    head, _, method = target["operationId"].rpartition("_")
    return {
        **target,
        "operationId": f"{head}_namespaced_{method}",
        "parameters": {**target["parameters"], "namespace": NAMESPACE_EXPR},
    }


def with_namespaced(routes: tuple[Route, ...]) -> tuple[Route, ...]:
    """``routes`` and, after each per-swarm one, its namespaced twin."""
    out: list[Route] = []
    for route in routes:
        out.append(route)
        if (twin := route.namespaced()) is not None:
            out.append(twin)
    return tuple(out)


def link(operation_id: str, **parameters: str) -> dict[str, Any]:
    """An OpenAPI link to ``operation_id`` with runtime-expression ``parameters``."""
    return {"operationId": operation_id, "parameters": parameters}


SWARM = "$request.path.swarm"
FIRST_SEAT = "$response.body#/seats/0/seat"


#: The three key shapes of the scoped store (``store_rules.parse_key`` checks the same, and ``..``).
KEY_SHAPE = (
    r"^(objects/sha256/[0-9a-f]{64}"
    r"|checkpoints/[A-Za-z0-9][A-Za-z0-9._@-]{0,127}/(manifest-[0-9a-f]{64}|committed)\.json)$"
)
KEY = Param(
    "key",
    {"type": "string", "pattern": KEY_SHAPE, "not": {"pattern": r"\.\."}, "maxLength": 300},
    True,
    "key relative to the worker's scope: an object, a manifest or a commit pointer",
    "invalid_key",
)
SCOPE = (
    Param("swarm", {"type": "string", "pattern": IDENTIFIER, "maxLength": 128}, True, "the worker's swarm"),
    Param("task_id", {"type": "string", "pattern": IDENTIFIER, "maxLength": 128}, True, "the worker's task"),
    Param(
        "task_generation",
        {"type": "string", "pattern": r"^[1-9][0-9]{0,11}$", "maxLength": 12},
        True,
        "the worker's task generation",
    ),
    Param(
        "namespace",
        {"type": "string", "pattern": NAMESPACE, "maxLength": 63},
        False,
        "the worker's Swarm namespace, when its scope has one (absent: the name-only layout)",
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
#: A write that needs the swarm's lease, on a replica that may not hold it.
LEADER_RETRY: dict[int, tuple[str, Body]] = {
    503: (
        "Redis is unavailable, or this replica does not hold the lease (not_leader); retry after Retry-After",
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
STORE_NO_KEY = {
    **DENIED,
    400: ("a query parameter that does not match its schema", "json"),
    503: (
        "no checkpoint store configured, Redis is unavailable, or the worker's swarm is not served "
        "yet (swarm_not_published; retry after Retry-After)",
        "json",
    ),
}
STORE = {**STORE_NO_KEY, 400: ("invalid key, or a query parameter that does not match its schema", "json")}
FIRST_SWARM = "$response.body#/swarms/0/swarm"
FIRST_NAMESPACE = "$response.body#/swarms/0/namespace"
FIRST = {"namespace": FIRST_NAMESPACE, "swarm": FIRST_SWARM}
#: From the list of swarms to each one's reads and controls (by namespace and name: never ambiguous).
SWARMS_LINKS = {
    "status": link("status_namespaced_get", **FIRST),
    "checkpoints": link("checkpoints_namespaced_get", **FIRST, seat="$response.body#/swarms/0/seats/0"),
    "restore_request": link(
        "restore_request_namespaced_post", **FIRST, seat="$response.body#/swarms/0/seats/0"
    ),
    "events": link("events_namespaced_get", **FIRST),
    "ledger": link("data_namespaced_get", **FIRST),
    "recoveries": link("list_held_namespaced_get", **FIRST),
}
#: From a seat's recorded (202) or already accepted (200) choice: its decision, and the swarm's reads.
SEAT_LINKS = {
    "decide": link("restore_decision_post", execution="$response.body#/execution_id"),
    "status": link("status_get", swarm=SWARM),
    "checkpoints": link("checkpoints_get", swarm=SWARM, seat="$request.path.seat"),
    "events": link("events_get", swarm=SWARM),
    "ledger": link("data_get", swarm=SWARM),
    "recoveries": link("list_held_get", swarm=SWARM),
}
#: From a swarm's status to what can be read or done about it.
STATUS_LINKS = {
    "checkpoints": link("checkpoints_get", swarm=SWARM, seat=FIRST_SEAT),
    "events": link("events_get", swarm=SWARM),
    "ledger": link("data_get", swarm=SWARM),
    "recoveries": link("list_held_get", swarm=SWARM),
    "pause": link("pause_post", swarm=SWARM),
    "unpause": link("unpause_post", swarm=SWARM),
    "restore_request": link("restore_request_post", swarm=SWARM, seat=FIRST_SEAT),
    "restore_decision": link("restore_decision_post", execution="$response.body#/handoffs/0/execution_id"),
}

ROUTES: tuple[Route, ...] = (
    Route(
        "GET",
        "/healthz",
        ops.healthz,
        "Liveness: the event loop runs and kopf is up",
        "none",
        responses={200: ("alive", Health), 503: ("kopf is stopping", Health)},
    ),
    Route(
        "GET",
        "/readyz",
        ops.readyz,
        "Readiness: kopf is up and Redis answers",
        "none",
        responses={200: ("ready", Readiness), 503: ("not ready", Readiness)},
    ),
    Route(
        "GET",
        "/metrics",
        ops.metrics,
        "Prometheus metrics",
        "none",
        responses={
            200: (
                "metrics: OpenMetrics 1.0 when Accept asks for it, else the text format 0.0.4 (Redis "
                "unavailable: agentihooks_redis_up 0, the Redis-backed families left out)",
                "metrics",
            )
        },
    ),
    Route(
        "GET",
        "/v1/openapi.json",
        ops.openapi,
        "This OpenAPI document",
        "none",
        responses={200: ("the document", "json")},
    ),
    Route(
        "POST",
        "/v1/executions/{execution}/restore-decision",
        decisions.restore_decision,
        "Choose resume or fresh for a fenced attempt",
        "operator_or_master",
        DecisionRequest,
        {
            200: ("accepted now (or the same accepted decision again)", DecisionAnswer),
            202: ("recorded for the lease holder's next pass", DecisionAnswer),
            400: ("invalid body, or (operator) not an execution id", "json"),
            **DENIED,
            404: ("unknown execution (operator only)", "json"),
            409: ("refused: not pending, or no checkpoint to resume from", "json"),
            **LARGE,
            503: (
                "Redis is unavailable, or the execution's swarm is not served by this replica yet "
                "(swarm_not_published: for about a second after an operator starts); retry after "
                "Retry-After",
                "json",
            ),
        },
    ),
    Route(
        "POST",
        "/v1/executions/{execution}/outcome",
        workers.outcome,
        "A replacement reports its verified restore outcome",
        "worker",
        RestoreOutcome,
        {200: ("stored (or the same outcome again)", StoredOutcome), **WORKER},
    ),
    Route(
        "POST",
        "/v1/executions/{execution}/session",
        workers.session,
        "Heartbeat: the native session id the attempt holds",
        "worker",
        SessionReport,
        {200: ("recorded", Accepted), **WORKER},
    ),
    Route(
        "POST",
        "/v1/executions/{execution}/watermark",
        workers.watermark,
        "Heartbeat: the last archived transcript record",
        "worker",
        WatermarkReport,
        {200: ("recorded", Accepted), **WORKER},
    ),
    Route(
        "POST",
        "/v1/executions/{execution}/credential",
        workers.credential,
        "Trade the credential the worker's Pod started with for a new one (once, before the harness runs)",
        "worker",
        None,
        {
            200: ("the new credential", CredentialExchanged),
            **DENIED,
            409: ("not_current, or exchanged: this credential was traded already", "json"),
            **LARGE,
            **WORKER_RETRY,
        },
    ),
    Route(
        "POST",
        "/v1/executions/{execution}/lease",
        workers.lease,
        "Renew the worker's lease on its attempt, with its progress (session, watermark) when due",
        "worker",
        LeaseRenewal,
        {200: ("renewed", LeaseGranted), **WORKER},
    ),
    Route(
        "POST",
        "/v1/executions/{execution}/restore-report",
        workers.restore_report,
        "A worker reports its restore for the metrics: result or refusal reason, and its duration",
        "worker",
        RestoreReport,
        {
            200: ("counted (a repeat for the same execution is answered alike and not counted)", Accepted),
            **DENIED,
            400: ("invalid body", "json"),
            **LARGE,
            **WORKER_RETRY,
        },
    ),
    Route(
        "GET",
        "/v1/executions/{execution}/checkpoint-store/object",
        store.read_object,
        "Stream an object of the checkpoint the directive names",
        "worker",
        responses={200: ("the bytes", "octet"), 404: ("no such object", "json"), **STORE},
        query=(KEY, *SCOPE),
    ),
    Route(
        "PUT",
        "/v1/executions/{execution}/checkpoint-store/object",
        store.write_object,
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
        query=(
            KEY,
            *SCOPE,
            Param("mode", {"type": "string", "enum": ["replace", "once"]}, code="invalid_mode"),
        ),
    ),
    Route(
        "GET",
        "/v1/executions/{execution}/checkpoint-store/size",
        store.object_size,
        "Size of a readable object (null when absent)",
        "worker",
        responses={200: ("size", SizeAnswer), **STORE},
        query=(KEY, *SCOPE),
    ),
    Route(
        "GET",
        "/v1/executions/{execution}/checkpoint-store/keys",
        store.list_keys,
        "Keys of the named checkpoint",
        "worker",
        responses={200: ("keys", KeysAnswer), **STORE_NO_KEY},
        query=(Param("under", {"type": "string", "maxLength": 300}), *SCOPE),
    ),
    Route(
        "GET",
        "/v1/swarms",
        swarms.swarms,
        "The swarms the caller may read (all for the operator, its own for a master)",
        "operator_or_master",
        responses={200: ("swarms and their seats", SwarmList), **DENIED},
        links={200: SWARMS_LINKS},
    ),
    Route(
        "GET",
        "/v1/swarms/{swarm}/status",
        swarms.status,
        "Swarm status with handoff cards",
        "operator_or_master",
        responses={200: ("status", StatusAnswer), **SWARM_READ},
        links={200: STATUS_LINKS},
    ),
    Route(
        "POST",
        "/v1/swarms/{swarm}/pause",
        swarms.pause,
        "Pause restore automation",
        "operator",
        responses={200: ("paused", PauseAnswer), 503: ("lease held elsewhere", "json"), **SWARM_READ},
    ),
    Route(
        "POST",
        "/v1/swarms/{swarm}/unpause",
        swarms.unpause,
        "Resume restore automation",
        "operator",
        responses={200: ("unpaused", PauseAnswer), 503: ("lease held elsewhere", "json"), **SWARM_READ},
    ),
    Route(
        "GET",
        "/v1/swarms/{swarm}/seats/{seat}/checkpoints",
        swarms.checkpoints,
        "Checkpoints of a seat's task",
        "operator_or_master",
        responses={200: ("checkpoints", CheckpointsAnswer), **SWARM_READ},
    ),
    Route(
        "POST",
        "/v1/swarms/{swarm}/seats/{seat}/restore-request",
        decisions.restore_request,
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
        links={200: SEAT_LINKS, 202: SEAT_LINKS},
    ),
    Route(
        "POST",
        "/v1/swarms/{swarm}/seats/{seat}/confirm-stopped",
        relaunch.confirm_stopped,
        "The operator confirms the seat's fenced attempt has stopped: its replacement no longer waits",
        "operator",
        ConfirmStoppedRequest,
        {
            200: ("confirmed (or confirmed before: replayed)", ConfirmStoppedAnswer),
            400: ("invalid body", "json"),
            **DENIED,
            404: ("unknown swarm or seat", "json"),
            409: (
                "not_fenced: no such fenced attempt of the seat; not_waiting: nothing waits for it",
                "json",
            ),
            **LARGE,
            **LEADER_RETRY,
        },
    ),
    Route(
        "POST",
        "/v1/swarms/{swarm}/seats/{seat}/relaunch",
        relaunch.relaunch,
        "Launch the seat's refused replacement's directive again as its next generation (cause fixed)",
        "operator_or_master",
        RelaunchRequest,
        {
            200: ("relaunched (or the same relaunch again: replayed)", RelaunchAnswer),
            400: ("invalid body", "json"),
            **DENIED,
            404: ("unknown swarm or seat", "json"),
            409: ("not_refused: the seat's attempt reported no refused restore", "json"),
            **LARGE,
            **LEADER_RETRY,
        },
    ),
    Route(
        "POST",
        "/v1/executions/{execution}/restore-refusal",
        relaunch.restore_refusal,
        "A replacement reports that it refused its restore, before it exits (the seat waits for a relaunch)",
        "worker",
        RestoreRefusalReport,
        {200: ("stored (or the same refusal again)", RestoreRefusalAnswer), **WORKER},
    ),
    Route(
        "GET",
        "/v1/swarms/{swarm}/events",
        swarms.events,
        "Recovery events (JSON), or a Server-Sent Events stream with follow=true (a client that "
        "reconnects sends the Last-Event-ID it saw and gets only the events after it)",
        "operator_or_master",
        responses={
            200: (
                "events (JSON), or a stream of them with follow=true",
                EventStream(EventsAnswer, RecoveryEvent),
            ),
            400: (
                "a count that is not an integer from 1 to 1000, a follow that is not true or false, or "
                "a Last-Event-ID that is no event id",
                "json",
            ),
            **SWARM_READ,
        },
        query=(
            Param("count", {"type": "integer", "minimum": 1, "maximum": 1000}),
            Param("follow", {"type": "boolean"}),
        ),
    ),
)


def ledger_routes() -> tuple[Route, ...]:
    """The ledger's data route (the ledger package registers it; documented here with the API's)."""
    from ..ledger.routes import data

    return (
        Route(
            "GET",
            "/v1/swarms/{swarm}/ledger",
            data,
            "The ledger page's data: task rows, handoff cards, the pause switch, the caller",
            "operator_or_master",
            responses={200: ("the page's data", LedgerAnswer), **SWARM_READ},
        ),
    )


@cache
def all_routes() -> tuple[Route, ...]:
    """Every documented route: the table above, the held recoveries' and the ledger's data route."""
    from .handlers.held import HELD_ROUTES

    return with_namespaced(tuple(_fenced(r) for r in (*ROUTES, *HELD_ROUTES, *ledger_routes())))


#: Every worker route's answer to the credential a fence revoked (the worker stops its agent on it).
FENCED: dict[int, tuple[str, Body]] = {
    410: ("fenced: this attempt was fenced and its credential revoked; its worker stops its agent", "json")
}


def _fenced(route: Route) -> Route:
    return replace(route, responses={**route.responses, **FENCED}) if route.auth == "worker" else route


@cache
def route_table() -> dict[tuple[str, str], Route]:
    """``(method, path template) → Route`` for every documented route (``HEAD`` as its ``GET``)."""
    table = {(r.method, r.path): r for r in all_routes()}
    table.update({("HEAD", path): r for (method, path), r in list(table.items()) if method == "GET"})
    return table


@cache
def route_auth() -> dict[str, Auth]:
    """Each route's path template → who may call it, for the authentication middleware.

    Every path has one kind of caller for all its methods.
    """
    table: dict[str, Auth] = {}
    for route in all_routes():
        assert table.setdefault(route.path, route.auth) == route.auth, route.path
    return table
