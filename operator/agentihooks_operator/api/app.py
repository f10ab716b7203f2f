"""The aiohttp application: the route table, the authentication middleware (:mod:`.access.authn`), and one
middleware that turns every failure into JSON.

Errors never carry a credential, a digest or a stack trace; unexpected ones
are logged with their type only and answered 500 ``internal`` (503 ``stopping`` once the operator
was told to stop: its clients may close under a request in flight); a Kubernetes call that fails under a
request is 503 ``kubernetes_unavailable`` (temporary) or 502 ``kubernetes_refused``. A 405 keeps its
``Allow`` header. Every answer carries ``X-Content-Type-Options: nosniff`` and
``Cache-Control: no-store`` (:data:`API_HEADERS`). A write this replica cannot make
without the swarm's lease is forwarded to the replica holding it (:mod:`.access.forward`).
"""

from __future__ import annotations

import logging

import redis
from aiohttp import web

from ..k8s.errors import ApiError
from ..recovery import InvalidInput, LeaseLost, RecoveryRefused
from ..recovery.errors import StoreUnavailable
from ..recovery.store.durable import NotReplicated
from .access.authn import authenticate
from .access.forward import forward, setup_forwarding
from .common import BODY_TIMEOUT, STATE, Handler, route_name
from .errors import HttpProblem, not_leader
from .params import check_query
from .refusal_log import log_refusals
from .routes import ROUTES, with_namespaced
from .state import ApiState

log = logging.getLogger("agentihooks.api")
#: Headers on every answer of the API (the ledger page adds its own policy on top).
API_HEADERS = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}


def _problem(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"error": code, "message": message}, status=status, headers=headers)


async def _closing(request: web.Request, problem: HttpProblem) -> web.StreamResponse:
    """Answer ``problem`` and close the connection at once (a body that stopped arriving is not
    waited for, as aiohttp would otherwise do for a few seconds)."""
    headers = {k: v for k, v in problem.headers.items() if k.lower() != "connection"}
    resp = _problem(problem.status, problem.code, problem.message, headers)
    resp.force_close()
    await resp.prepare(request)
    await resp.write_eof()
    request.protocol.force_close()
    return resp


@web.middleware
async def problems(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except HttpProblem as e:
        if e.headers.get("Connection", "").lower() == "close":
            return await _closing(request, e)
        return _problem(e.status, e.code, e.message, e.headers)
    except RecoveryRefused as e:
        return _problem(409, e.reason, e.message)
    except InvalidInput as e:  # its text may quote the input: logged by type, answered in general terms
        log.info(
            "control API: %s %s: the recovery core refused an input (%s)",
            request.method,
            route_name(request),
            type(e).__name__,
        )
        return _problem(
            400, "invalid_input", "invalid input: a value in the request is not one the recovery core accepts"
        )
    except LeaseLost:  # nothing changed here: the replica holding the lease is asked instead, once
        forwarded = await forward(request)
        if forwarded is not None:
            return forwarded
        p = not_leader()
        return _problem(p.status, p.code, p.message, p.headers)
    except (redis.RedisError, StoreUnavailable) as e:  # a write's answer lost: 503, the retry replays it
        what = type(e.__cause__ or e).__name__  # StoreUnavailable names the Redis error it carries
        log.warning("control API: Redis failed on %s %s (%s)", request.method, route_name(request), what)
        return _problem(503, "redis_unavailable", "Redis is unavailable; retry shortly", {"Retry-After": "2"})
    except NotReplicated:  # written on the primary, not yet confirmed on its replicas: unknown
        log.warning("control API: %s %s: a write is not confirmed on Redis's replicas", request.method,
                    route_name(request))  # fmt: skip
        return _problem(
            503,
            "not_replicated",
            "the write is not yet confirmed on Redis's replicas; retry shortly",
            {"Retry-After": "2"},
        )
    except ApiError as e:  # the API server, not the caller: its path and message stay in the log
        return _kubernetes(request, e)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        # keep what the answer must carry: the methods a 405's path allows (RFC 9110)
        kept = {k: v for k, v in e.headers.items() if k.lower() == "allow"}
        return _problem(e.status, e.reason.lower().replace(" ", "_"), e.reason, kept or None)
    except Exception as e:
        state: ApiState | None = request.app.get(STATE)
        if state is not None and not state.kopf_ready():
            # The operator is stopping and closed a client under this request: temporary, and a retry
            # (of another replica) replays whatever was written before (found by the fault campaign).
            log.warning(
                "control API: %s %s failed while the operator stops (%s)",
                request.method,
                route_name(request),
                type(e).__name__,
            )
            return _problem(503, "stopping", "this replica is stopping; retry shortly", {"Retry-After": "1"})
        log.error("control API: %s %s failed (%s)", request.method, route_name(request), type(e).__name__)
        return _problem(500, "internal", "internal error")


def _kubernetes(request: web.Request, e: ApiError) -> web.Response:
    """A Kubernetes call that failed under a request. Unreachable, overloaded or failing (0, 429,
    5xx) is temporary: 503 with ``Retry-After``, and a retry is safe (a write made before the call
    failed is replayed, not repeated). A refusal (an RBAC 403, a conflict) is 502: the operator's
    own access, named by its reason, not something the caller can fix by asking again soon."""
    log.warning(
        "control API: %s %s: the Kubernetes API failed (%s %s: %s %s)",
        request.method,
        route_name(request),
        e.method,
        e.path,
        e.status or "unreachable",
        e.reason,
    )
    if e.status in {0, 429} or e.status >= 500:
        return _problem(
            503,
            "kubernetes_unavailable",
            "the Kubernetes API is unavailable; retry shortly",
            {"Retry-After": "2"},
        )
    return _problem(
        502, "kubernetes_refused", f"the Kubernetes API refused the operator's call ({e.status} {e.reason})"
    )


async def add_api_headers(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: every answer, errors and streams included, is never sniffed or cached."""
    for name, value in API_HEADERS.items():
        response.headers[name] = value


def create_app(state: ApiState, body_timeout: float = 30.0) -> web.Application:
    """The control API for ``state``; serve it with :func:`.server.start_control_api`.

    ``body_timeout``: seconds a JSON body may take to arrive (for uploads, the longest pause).
    """
    app = web.Application(
        middlewares=[log_refusals, problems, authenticate, check_query], client_max_size=64 * 1024
    )
    app[STATE] = state
    app[BODY_TIMEOUT] = body_timeout
    app.on_response_prepare.append(add_api_headers)
    setup_forwarding(app, state)
    for route in with_namespaced(ROUTES):
        app.router.add_route(route.method, route.path, route.handler)
    from ..ledger import setup_ledger  # here, not at the top: the ledger package imports this one

    setup_ledger(app)
    from .handlers.held import setup_held

    setup_held(app)
    return app
