"""A request that needs a swarm's lease, reaching a replica without it, is forwarded once to the
replica that holds it: the API works whichever replica the Service picks.

When a route raises ``LeaseLost`` (the recovery core's guard refused the write
here: nothing changed), :func:`forward` reads the swarm's ``control-owner`` key
for the holder's id, looks up the address it advertises (:mod:`.endpoints`),
and sends the same request there once: the method, the path and query, the
body bytes the client sent (kept by ``read_capped``), and the ``Content-Type``
and ``Accept`` headers, plus ``X-Agentihooks-Forwarded-By`` naming this replica
and an assertion (:mod:`.assertion`) that vouches for the caller this replica
authenticated: the caller's credential never leaves this replica. The holder
checks the assertion and the caller's rights itself, and its answer (status,
body, ``Retry-After``) is returned as is.

A request that already carries the marker is never forwarded again (no loops),
and :func:`forward` returns ``None``, so the caller answers ``503 not_leader``
as before, when there is no holder, no fresh address, the holder is this
replica, the address is not the holder's own operator Pod's (:mod:`.peers`: the
API server says, never Redis alone), or it cannot be reached within
``CONNECT_SECONDS``. Logs name the
route, the swarm and the holder, never a header value or the body.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import aiohttp
import redis
from aiohttp import web

from ...recovery.errors import RecoveryRefused
from ...recovery.store.records import ControlOwner
from ..common import (
    FORWARDED,
    FORWARDED_BY,
    RAW_BODY,
    REQUEST_SWARM,
    blocking,
    named_swarm,
    read_capped,
    route_name,
    state_of,
    token_digest,
)
from ..errors import HttpProblem
from ..registry import SwarmEntry
from ..state import ApiState
from .assertion import ASSERTIONS, HEADER, AssertionRefused, Assertions
from .endpoints import Endpoints

log = logging.getLogger("agentihooks.api")
#: The request headers the holder needs; nothing else is passed on (never ``Authorization``: the
#: caller's credential stays here, and an assertion vouches for the caller instead).
PASSED = ("Content-Type", "Accept")
#: Seconds to connect to the holder, and for its whole answer (a relaunch launches Pods).
CONNECT_SECONDS = 2.0
TOTAL_SECONDS = 25.0
#: The largest answer passed back (the forwarded routes answer a few kilobytes).
ANSWER_CAP = 1024 * 1024
CLIENT: web.AppKey[aiohttp.ClientSession] = web.AppKey("forward_client", aiohttp.ClientSession)
ENDPOINTS: web.AppKey[Endpoints] = web.AppKey("endpoints", Endpoints)


def setup_forwarding(app: web.Application, state: ApiState) -> None:
    """Give ``app`` the address registry and one HTTP client (opened at start-up, closed at clean-up)."""
    app[ENDPOINTS] = Endpoints(state.redis, state.key_prefix)
    app[ASSERTIONS] = Assertions(state.redis, state.key_prefix)

    async def client(app: web.Application) -> AsyncIterator[None]:
        timeout = aiohttp.ClientTimeout(total=TOTAL_SECONDS, sock_connect=CONNECT_SECONDS)
        app[CLIENT] = aiohttp.ClientSession(timeout=timeout, auto_decompress=False)
        yield
        await app[CLIENT].close()

    app.cleanup_ctx.append(client)


def holder_url(request: web.Request, entry: SwarmEntry) -> tuple[str, str] | None:
    """The holder of ``entry``'s lease and its fresh address, unless it is this replica (blocking)."""
    state = state_of(request)
    raw = state.redis.get(entry.recovery.keys.control_owner)
    if not raw:
        return None
    owner = ControlOwner.model_validate_json(raw).owner
    if owner == entry.holder:
        return None
    url = request.app[ENDPOINTS].lookup(owner)
    if url is None:
        return None
    if not state.peers.allowed(owner, url):
        log.warning(
            "control API: the address %s advertises is not its operator Pod's; it is not contacted", owner
        )
        return None
    return owner, url


async def _body(request: web.Request) -> bytes | None:
    """The bytes the client sent: kept by the route, else read now (``None`` if partly consumed)."""
    if RAW_BODY in request:
        return request[RAW_BODY]
    if not request.body_exists:
        return b""
    try:
        body = await read_capped(request)
    except HttpProblem:  # too large or too slow: the client is answered not_leader and retries
        return None
    if request.content_length is not None and len(body) != request.content_length:
        return None  # a route streamed part of it: it cannot be sent again
    return body


async def _read_all(resp: aiohttp.ClientResponse) -> bytes:
    """The holder's whole answer, refused past ``ANSWER_CAP`` bytes."""
    out = bytearray()
    while chunk := await resp.content.read(ANSWER_CAP + 1 - len(out)):
        out += chunk
        if len(out) > ANSWER_CAP:
            raise aiohttp.ClientPayloadError("the lease holder's answer is too large")
    return bytes(out)


def _entry_of(request: web.Request) -> SwarmEntry | None:
    """The published swarm this request is about: the one a route found, else the path's."""
    state = state_of(request)
    swarm = request.get(REQUEST_SWARM)
    if swarm is not None:
        return state.registry.get(swarm.name, swarm.namespace)
    if "swarm" not in request.match_info:
        return None
    try:
        return state.registry.get(*named_swarm(request))
    except RecoveryRefused:  # a name several namespaces hold: answered 409 here, never forwarded
        return None


async def forward(request: web.Request) -> web.Response | None:
    """The lease holder's answer to this request, or ``None`` when it cannot be had (see module)."""
    if FORWARDED_BY in request.headers or CLIENT not in request.app:
        return None
    entry = _entry_of(request)
    if entry is None:
        return None
    swarm = entry.id
    try:
        found = await blocking(holder_url, request, entry)
    except (redis.RedisError, ValueError) as e:  # Redis down, or a record it cannot read: not_leader
        log.warning("control API: the lease holder of swarm %s is unknown (%s)", swarm, type(e).__name__)
        return None
    body = await _body(request) if found is not None else None
    if entry is None or found is None or body is None:
        return None
    owner, url = found
    headers = {h: request.headers[h] for h in PASSED if h in request.headers}
    headers[FORWARDED_BY] = entry.holder
    try:
        headers[HEADER] = await blocking(
            request.app[ASSERTIONS].sign, request.method, request.raw_path, body, token_digest(request)
        )
    except (redis.RedisError, AssertionRefused) as e:
        log.warning("control API: cannot vouch for a forwarded request (%s)", type(e).__name__)
        return None
    headers["Accept-Encoding"] = "identity"  # the body is passed back as it comes
    where = f"{request.method} {route_name(request)}"
    try:
        async with request.app[CLIENT].request(
            request.method,
            url.rstrip("/") + request.raw_path,
            data=body,
            headers=headers,
            allow_redirects=False,
        ) as resp:
            answer = await _read_all(resp)
            status, kind, retry = (
                resp.status,
                resp.headers.get("Content-Type"),
                resp.headers.get("Retry-After"),
            )
    except (aiohttp.ClientError, TimeoutError) as e:
        log.warning(
            "control API: %s could not reach %s, the lease holder of swarm %s (%s)",
            where,
            owner,
            swarm,
            type(e).__name__,
        )
        return None
    request[FORWARDED] = True
    log.info("control API: %s forwarded to %s, the lease holder of swarm %s: %s", where, owner, swarm, status)
    out = web.Response(status=status, body=answer, headers={"Retry-After": retry} if retry else None)
    if kind:
        out.headers["Content-Type"] = kind
    return out
