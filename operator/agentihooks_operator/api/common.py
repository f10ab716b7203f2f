"""Helpers every route module uses: the shared state, JSON bodies, blocking calls, caller checks."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from functools import cache
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from ..recovery.identity import SwarmId
from ..recovery.models import EXECUTION_RE
from .access.auth import Caller, is_operator, master_agent, require_token, sha256_hex
from .errors import HttpProblem, bad_request, fenced, forbidden, not_published
from .registry import SwarmEntry
from .state import ApiState

log = logging.getLogger("agentihooks.api")
STATE: web.AppKey[ApiState] = web.AppKey("state", ApiState)
#: Seconds a JSON body may take to arrive in full (for an upload: the longest pause between bytes).
BODY_TIMEOUT: web.AppKey[float] = web.AppKey("body_timeout", float)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
#: Set by the authentication middleware on a worker's request once it checked the path's execution's
#: own credential: ``(SwarmEntry, AttemptRecord)``, so the handler does not look it up again.
WORKER_FOUND: web.RequestKey[tuple[SwarmEntry, Any]] = web.RequestKey("worker_found", tuple)
#: Which kind of known caller the authentication middleware found: operator, master or worker.
CALLER_KIND: web.RequestKey[str] = web.RequestKey("caller_kind", str)
#: Set instead when the credential is the execution's own but its swarm is not published yet.
WORKER_UNPUBLISHED: web.RequestKey[bool] = web.RequestKey("worker_unpublished", bool)
#: The JSON body as the client sent it (set by :func:`read_capped`): a request this replica cannot
#: serve without the swarm's lease is forwarded with these bytes (:mod:`.access.forward`).
RAW_BODY: web.RequestKey[bytes] = web.RequestKey("raw_body", bytes)
#: The caller's credential digest vouched for by another replica's assertion (:mod:`.access.assertion`):
#: set on a forwarded request, which carries no bearer token.
ASSERTED: web.RequestKey[str] = web.RequestKey("asserted_digest", str)
#: The header a forwarding replica sets (its own id): a request carrying it is never forwarded again.
FORWARDED_BY = "X-Agentihooks-Forwarded-By"
#: The swarm the request concerns, once a route resolved it (the lease holder to forward to).
REQUEST_SWARM: web.RequestKey[SwarmId] = web.RequestKey("request_swarm", SwarmId)
#: Set when the answer is the lease holder's, to a request forwarded there (it logged it already).
FORWARDED: web.RequestKey[bool] = web.RequestKey("forwarded", bool)
JSON_CAP = 64 * 1024
#: Arrays and objects a JSON body may nest; the bodies of this API need three at most.
JSON_MAX_DEPTH = 32
M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


def named_swarm(request: web.Request) -> tuple[str, str | None]:
    """The swarm a per-swarm route names: its name, and its namespace when the path has one
    (``/v1/namespaces/{namespace}/swarms/{swarm}/...``); ``None`` asks for the one namespace
    holding the name (refused naming them all when several do)."""
    return request.match_info["swarm"], request.match_info.get("namespace")


def state_of(request: web.Request) -> ApiState:
    return request.app[STATE]


async def blocking(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking Redis or store call off kopf's event loop."""
    return await asyncio.to_thread(fn, *args, **kwargs)


def answer(data: BaseModel | dict[str, Any] | list[Any], status: int = 200) -> web.Response:
    body = data.model_dump(mode="json") if isinstance(data, BaseModel) else data
    return web.json_response(body, status=status)


def too_deep(raw: bytes, limit: int = JSON_MAX_DEPTH) -> bool:
    """True when ``raw`` has more than ``limit`` arrays or objects open at once (brackets in strings
    do not count). Checked before parsing: Python's parser recurses once per level and fails with a
    RecursionError on a deep enough body. Linear in the body, which is at most ``JSON_CAP`` bytes.
    """
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    depth = 0
    in_string = escaped = False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # closing quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > limit:
                return True
        elif byte in (0x5D, 0x7D):  # ] }
            depth -= 1
    return False


def _too_large() -> HttpProblem:
    return HttpProblem(413, "body_too_large", f"the JSON body may be at most {JSON_CAP} bytes")


def body_timeout(request: web.Request) -> HttpProblem:
    """The body stopped arriving: 408 and the connection is closed (the rest is not waited for)."""
    log.info(
        "control API: a request body on %s %s did not arrive in time", request.method, route_name(request)
    )
    seconds = request.app[BODY_TIMEOUT]
    return HttpProblem(
        408,
        "body_timeout",
        f"the request body did not arrive within {seconds:g} seconds",
        headers={"Connection": "close"},
    )


def too_slow(request: web.Request) -> HttpProblem:
    """An upload that averages less than the floor rate: 408 and the connection is closed."""
    log.info("control API: an upload on %s was slower than the floor rate", route_name(request))
    return HttpProblem(
        408,
        "upload_too_slow",
        "the upload averaged less than the controller's floor rate; send it again faster",
        headers={"Connection": "close"},
    )


async def read_capped(request: web.Request, cap: int = JSON_CAP) -> bytes:
    """The whole body, refused with 413 as soon as it is longer than ``cap`` (nothing past it is read)
    and with 408 when it has not arrived within the body timeout."""
    if RAW_BODY in request:  # read already (a forwarded request's assertion covers it)
        return request[RAW_BODY]
    if request.content_length is not None and request.content_length > cap:
        raise _too_large()
    raw = bytearray()
    try:
        async with asyncio.timeout(request.app[BODY_TIMEOUT]):
            while len(raw) <= cap:
                chunk = await request.content.read(cap + 1 - len(raw))
                if not chunk:
                    request[RAW_BODY] = body = bytes(raw)
                    return body
                raw += chunk
    except TimeoutError as e:
        raise body_timeout(request) from e
    raise _too_large()


def route_name(request: web.Request) -> str:
    """The matched route's template (``/v1/swarms/{swarm}/status``), never the raw path: logs name
    the route, not what a caller put in it."""
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else "(no route)"


def _invalid_body(request: web.Request, why: str) -> HttpProblem:
    log.info("control API: refused a JSON body on %s %s: %s", request.method, route_name(request), why)
    return bad_request(f"invalid body: {why}", "invalid_body")


async def body_model(request: web.Request, model: type[M]) -> M:
    """Parse the JSON body as ``model``: 413 past ``JSON_CAP`` bytes and 400 ``invalid_body`` past
    ``JSON_MAX_DEPTH`` levels, both before parsing; 400 naming every wrong field."""
    raw = await read_capped(request)
    if too_deep(raw):
        raise _invalid_body(request, f"the JSON nests deeper than {JSON_MAX_DEPTH} levels")
    try:
        data = json.loads(raw or b"null")
    except RecursionError as e:  # not reached after too_deep; kept so no body can ever answer 500
        raise _invalid_body(request, "the JSON nests too deep") from e
    except (ValueError, UnicodeDecodeError) as e:
        raise bad_request("the body is not valid JSON", "invalid_json") from e
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise bad_request("invalid body: " + "; ".join(field_errors(model, e)), "invalid_body") from e


@cache
def _field_names(model: type[BaseModel]) -> frozenset[str]:
    """Every property name the model's JSON schema declares, nested models included."""
    names: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            props = node.get("properties")
            if isinstance(props, dict):
                names.update(props)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(model.model_json_schema())
    return frozenset(names)


def field_errors(model: type[BaseModel], error: ValidationError) -> list[str]:
    """One ``field: what is wrong`` per error, by field and never by value: a location part that is
    not a declared field (a key the caller made up) reads ``*``, an unexpected field reads
    ``unexpected field``, and a message that would quote the input says ``invalid value``."""
    known = _field_names(model)
    out = []
    for err in error.errors(include_url=False):
        loc = [str(p) if isinstance(p, int) or p in known else "*" for p in err["loc"]]
        if err["type"] == "extra_forbidden":
            where, what = ".".join(loc[:-1]) or "body", "unexpected field"
        else:
            where, what = ".".join(loc) or "body", str(err["msg"])
            given = err.get("input")
            if isinstance(given, (str, int, float)) and not isinstance(given, bool) and str(given) in what:
                what = "invalid value"
        out.append(f"{where}: {what}")
    return out


def token_digest(request: web.Request) -> str:
    """sha256 hex of the bearer token (401 when missing or malformed); the token itself is dropped.
    On a forwarded request, the digest the forwarding replica's assertion vouches for."""
    if (asserted := request.get(ASSERTED)) is not None:
        return str(asserted)
    return sha256_hex(require_token(request.headers.get("Authorization")))


def operator_only(request: web.Request) -> Caller:
    if not is_operator(token_digest(request), state_of(request).operator_hash):
        raise forbidden()
    return Caller("operator")


def not_a_worker(request: web.Request) -> None:
    """A worker's credential never decides: refused before the body is read or anything looked up."""
    if request.get(CALLER_KIND) == "worker":
        raise forbidden()


def operator_or_master(request: web.Request, entry: SwarmEntry) -> Caller:
    """The operator, or a registered master of ``entry``'s swarm (bound to its agent)."""
    request[REQUEST_SWARM] = entry.id
    digest = token_digest(request)
    if is_operator(digest, state_of(request).operator_hash):
        return Caller("operator")
    agent = master_agent(digest, entry.masters)
    if agent is None:
        raise forbidden()
    return Caller("master", agent=agent)


def valid_execution(execution_id: str) -> bool:
    return bool(EXECUTION_RE.fullmatch(execution_id))


async def worker_of(request: web.Request, execution_id: str) -> tuple[SwarmEntry, Any]:
    """The swarm entry and attempt record of a worker calling with its own live credential, else 403."""
    if (checked := request.get(WORKER_FOUND)) is not None:
        entry, record = checked
        request[REQUEST_SWARM] = entry.id
        return entry, record
    if request.get(WORKER_UNPUBLISHED):
        raise not_published()
    state = state_of(request)
    digest = token_digest(request)
    if not valid_execution(execution_id):
        raise forbidden()
    found = await blocking(state.find_execution, execution_id)
    if found is None:
        if await blocking(state.unpublished_worker_digest, execution_id, digest):
            raise not_published()
        raise forbidden()
    entry, record = found
    if not await blocking(entry.recovery.check_worker_digest, execution_id, digest):
        reason = await blocking(entry.recovery.fenced_worker_digest, execution_id, digest)
        if reason is not None:
            raise fenced(f"this attempt was fenced ({reason}): its worker must stop its agent")
        raise forbidden()
    request[REQUEST_SWARM] = entry.id
    request[WORKER_FOUND] = (entry, record)
    return entry, record
