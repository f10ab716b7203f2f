"""Health, readiness, metrics and the OpenAPI document (no credential needed).

``/healthz`` answers 200 while the event loop runs and kopf has started and
is not stopping; ``/readyz`` also needs Redis to answer a PING.
"""

from __future__ import annotations

import asyncio

import redis
from aiohttp import web

from .. import metrics as _metrics
from ..common import blocking, state_of
from ..openapi import document
from ..state import ApiState

#: Seconds a readiness PING may take before the replica counts as not ready.
PING_SECONDS = 2.0


def liveness(state: ApiState) -> web.Response:
    """The ``/healthz`` answer (here and on the probes' own listener, :mod:`..health`)."""
    ok = state.kopf_ready()
    return web.json_response({"status": "ok" if ok else "stopping", "kopf": ok}, status=200 if ok else 503)


def readiness(state: ApiState, redis_ok: bool) -> web.Response:
    """The ``/readyz`` answer, given whether Redis answered its PING."""
    kopf_ok = state.kopf_ready()
    ok = kopf_ok and redis_ok
    body = {"status": "ready" if ok else "not ready", "kopf": kopf_ok, "redis": redis_ok}
    return web.json_response(body, status=200 if ok else 503)


async def healthz(request: web.Request) -> web.Response:
    return liveness(state_of(request))


async def readyz(request: web.Request) -> web.Response:
    """Bounded like the health listener's: a Redis that does not answer (its client retrying a
    refused connection with backoff) makes the replica not ready within ``PING_SECONDS``, never a
    probe left waiting."""
    state = state_of(request)
    try:
        async with asyncio.timeout(PING_SECONDS):
            redis_ok = bool(await blocking(state.redis.ping))
    except (redis.RedisError, OSError, TimeoutError):
        redis_ok = False
    return readiness(state, redis_ok)


async def metrics(request: web.Request) -> web.Response:
    """OpenMetrics when the scraper's ``Accept`` asks for it, else the classic text format."""
    state = state_of(request)
    accept = request.headers.get("Accept", "")
    body, content_type = await blocking(_metrics.render, state, state.registry.entries(), accept)
    return web.Response(body=body, headers={"Content-Type": content_type, "Vary": "Accept"})


async def openapi(request: web.Request) -> web.Response:
    return web.json_response(document())
