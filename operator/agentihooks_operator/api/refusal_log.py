"""The controller's refusal line, for every refused recovery request, whichever layer refused it.

A recovery request is a choice or a relaunch a master or the operator sends:
``POST /v1/executions/{execution}/restore-decision`` and the seat routes
``.../restore-request`` and ``.../relaunch``. Whoever refuses one (the
authentication middleware, query or body validation, the route's own scope
checks, or the recovery core) answers with a 4xx problem; this middleware,
the outermost, sees that answer and logs exactly one line::

    controller: the recovery request for EXECUTION was refused: REASON

``EXECUTION`` is the execution the request is about (the path's, or the seat's attempt a seat route
resolved and left in :data:`REQUEST_EXECUTION`), else ``seat SWARM/SEAT`` (``seat
NAMESPACE/SWARM/SEAT`` on a namespaced route); ``REASON`` is the answer's ``message``, the same text
the caller got (never a token or a body). Path values are shown only when they are plain
identifiers, else quoted and shortened. Requests refused later, when the lease holder applies a
recorded request on its pass, are logged with the same line by the recovery core. ``5xx`` answers
(Redis down, not the lease holder) are not refusals: the caller retries. A request forwarded to the
lease holder (:mod:`.access.forward`) is logged there, not again by the replica that forwarded it.

A refusal by the recovery rules (``409``) is logged at WARNING; the others
(validation, credentials, unknown names, bodies too large or too slow) at
INFO, so a caller sending junk cannot fill the log with warnings.
"""

from __future__ import annotations

import json
import logging
import re

from aiohttp import web

from .common import FORWARDED, Handler

log = logging.getLogger("agentihooks.api")

_SEAT_ROUTES = ("/seats/{seat}/restore-request", "/seats/{seat}/relaunch")
#: The routes whose refusals are logged (route templates, as in the route table): the seat routes in
#: both their forms, by name alone and under the Swarm's namespace (the CLI and the ledger use that one
#: whenever they know the namespace).
RECOVERY_REQUEST_ROUTES = frozenset(
    {
        "/v1/executions/{execution}/restore-decision",
        *(f"/v1/swarms/{{swarm}}{tail}" for tail in _SEAT_ROUTES),
        *(f"/v1/namespaces/{{namespace}}/swarms/{{swarm}}{tail}" for tail in _SEAT_ROUTES),
    }
)
#: Set by a seat route once it knows which attempt the request is about.
REQUEST_EXECUTION: web.RequestKey[str] = web.RequestKey("recovery_request_execution", str)
_PLAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")
LINE = "controller: the recovery request for %s was refused: %s"


def _shown(value: str) -> str:
    if _PLAIN.fullmatch(value):
        return value
    text = repr(value[:64])
    return text if len(value) <= 64 else text + "..."


def _subject(request: web.Request) -> str:
    known = request.get(REQUEST_EXECUTION)
    if known:
        return _shown(known)
    info = request.match_info
    if "execution" in info:
        return _shown(info["execution"])
    swarm = _shown(info.get("swarm", ""))
    if "namespace" in info:
        swarm = f"{_shown(info['namespace'])}/{swarm}"
    return f"seat {swarm}/{_shown(info.get('seat', ''))}"


def _reason(resp: web.StreamResponse) -> str:
    text = resp.text if isinstance(resp, web.Response) else None
    if text:
        try:
            body = json.loads(text)
        except ValueError:
            body = None
        if isinstance(body, dict):
            message = body.get("message") or body.get("error")
            if isinstance(message, str) and message:
                return message
    return resp.reason or str(resp.status)


def _route(request: web.Request) -> str | None:
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else None


@web.middleware
async def log_refusals(request: web.Request, handler: Handler) -> web.StreamResponse:
    resp = await handler(request)
    forwarded = request.get(FORWARDED, False)  # the lease holder answered it, and logged it
    if 400 <= resp.status < 500 and _route(request) in RECOVERY_REQUEST_ROUTES and not forwarded:
        level = logging.WARNING if resp.status == 409 else logging.INFO
        log.log(level, LINE, _subject(request), _reason(resp))
    return resp
