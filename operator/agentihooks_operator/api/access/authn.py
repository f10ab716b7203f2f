"""Authentication before any lookup: the middleware every credentialed route passes first.

Before a route handler reads a swarm, a seat, an execution or a held recovery
named in the path, the bearer token must be one this controller knows:

- the operator token;
- the credential of a registered master of any swarm served here;
- a live worker credential: on a worker route, the path's execution's own
  (in a published swarm, or in one not published yet); on any route, any live
  worker credential of a published swarm.

A missing or malformed header is ``401 missing_credential`` /
``malformed_credential``; any other unknown token (never issued, or revoked by
a fence) is ``401 forbidden_scope`` with ``WWW-Authenticate: Bearer
error="invalid_token"``, except on a worker route of the very attempt whose fence
revoked it: that is ``410 fenced``, so the worker stops its agent at once. None
of these depend on what the path names, so without a known token nothing can
be learned about which swarms, seats, executions or recoveries exist.

A known token then meets the route's own rules (``403 forbidden_scope`` when it
does not grant the action). A swarm's existence is told to the operator only:
any other known caller naming a swarm that is not served gets ``403``, as for a
swarm it has no rights on.
"""

from __future__ import annotations

import logging

import redis
from aiohttp import web

from ..common import (
    ASSERTED,
    CALLER_KIND,
    FORWARDED_BY,
    WORKER_FOUND,
    WORKER_UNPUBLISHED,
    Handler,
    blocking,
    named_swarm,
    read_capped,
    route_name,
    state_of,
    valid_execution,
)
from ..errors import FORBIDDEN_SCOPE, HttpProblem, fenced, forbidden
from ..routes import Auth, route_auth
from ..state import ApiState
from .assertion import ASSERTIONS, HEADER, AssertionRefused
from .auth import is_operator, master_agent, require_token, sha256_hex

log = logging.getLogger("agentihooks.api")


def unknown_credential() -> HttpProblem:
    """A well-formed token this controller does not know (never issued, or revoked)."""
    return HttpProblem(
        401,
        FORBIDDEN_SCOPE,
        FORBIDDEN_SCOPE,
        headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
    )


def _route_auth(request: web.Request) -> Auth:
    resource = request.match_info.route.resource
    if resource is None:  # no route matched: 404 or 405, which say nothing about data
        return "none"
    return route_auth().get(resource.canonical, "none")


async def _own_worker(request: web.Request, state: ApiState, token: str | None, digest: str) -> bool:
    """The path's execution's own live credential (its swarm published here, or not yet); ``token``
    is ``None`` on a forwarded request, whose caller is known by ``digest`` alone."""
    execution = request.match_info.get("execution", "")
    if not valid_execution(execution):
        return False
    found = await blocking(state.find_execution, execution)
    if found is not None:
        entry, record = found
        ok = (
            await blocking(entry.recovery.check_worker_credential, execution, token)
            if token is not None
            else await blocking(entry.recovery.check_worker_digest, execution, digest)
        )
        if ok:
            request[WORKER_FOUND] = (entry, record)
            return True
        # The very credential this attempt's fence revoked: its worker is told so, and stops its agent.
        reason = await blocking(entry.recovery.fenced_worker_digest, execution, digest)
        if reason is not None:
            raise fenced(f"this attempt was fenced ({reason}): its worker must stop its agent")
        return False
    unpublished = (
        await blocking(state.unpublished_worker, execution, token)
        if token is not None
        else await blocking(state.unpublished_worker_digest, execution, digest)
    )
    if unpublished:
        request[WORKER_UNPUBLISHED] = True  # decided once: the handler answers 503, the worker retries
        return True
    return False


async def _known(
    request: web.Request, state: ApiState, token: str | None, digest: str, auth: Auth
) -> str | None:
    """Which kind of caller ``token`` is, or ``None`` when this controller does not know it."""
    if is_operator(digest, state.operator_hash):
        return "operator"
    if any(master_agent(digest, entry.masters) is not None for entry in state.registry.entries()):
        return "master"
    if auth == "worker" and await _own_worker(request, state, token, digest):
        return "worker"
    if await blocking(state.known_worker, digest):
        return "worker"
    return None


async def _asserted(request: web.Request) -> str:
    """The caller's digest a forwarding replica vouches for; 401 (logged without content) otherwise."""
    assertions = request.app.get(ASSERTIONS)
    body = await read_capped(request)
    try:
        if assertions is None:
            raise AssertionRefused("forwarding is off here")
        digest = await blocking(
            assertions.verify, request.headers[HEADER], request.method, request.raw_path, body
        )
    except AssertionRefused as e:
        log.warning(
            "control API: refused a forwarded %s %s: assertion %s",
            request.method,
            route_name(request),
            e.reason,
        )
        raise unknown_credential() from e
    except redis.RedisError as e:
        raise HttpProblem(503, "not_leader", "the lease holder cannot check the forwarded request") from e
    request[ASSERTED] = digest
    return digest


@web.middleware
async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
    auth = _route_auth(request)
    if auth == "none":
        return await handler(request)
    state = state_of(request)
    token: str | None
    if FORWARDED_BY in request.headers and HEADER in request.headers:
        token, digest = None, await _asserted(request)
    else:
        token = require_token(request.headers.get("Authorization"))
        digest = sha256_hex(token)
    kind = await _known(request, state, token, digest, auth)
    if kind is None:
        raise unknown_credential()
    request[CALLER_KIND] = kind
    swarm = request.match_info.get("swarm")
    if swarm is not None and kind != "operator" and state.registry.get(*named_swarm(request)) is None:
        raise forbidden()
    return await handler(request)
