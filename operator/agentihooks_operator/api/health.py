"""Liveness and readiness on a listener of their own, which the API's clients cannot starve.

The control API's listener is shared by every caller: past its connection cap
new clients wait in the listen queue, and its routes run Redis calls on the
event loop's shared worker threads. A caller holding every connection (270
open event streams, slow uploads) would leave the kubelet's probes waiting
too, and a liveness probe that waits restarts a healthy operator. So the
chart's probes go to a second port (``AGENTIHOOKS_HEALTH_PORT``) serving only:

- ``GET /healthz`` — 200 while kopf runs and is not stopping, else 503;
- ``GET /readyz`` — also needs Redis to answer a PING within ``PING_SECONDS``,
  run on one thread of this listener's own, never queued behind API work.

This listener has its own small connection cap and short timeouts (a probe
is one short request); the API port keeps answering both paths as before.
"""

from __future__ import annotations

import asyncio
import concurrent.futures

import redis
from aiohttp import web

from .handlers.ops import PING_SECONDS, liveness, readiness
from .limits import ServerLimits
from .server import ControlServer, serve
from .state import ApiState

#: A probe is one short request: a few connections, answered or dropped quickly.
LIMITS = ServerLimits(
    header_timeout=5.0, keepalive_timeout=5.0, body_timeout=5.0, max_connections=16, backlog=64
)
STATE: web.AppKey[ApiState] = web.AppKey("health_state", ApiState)
PINGER: web.AppKey[concurrent.futures.ThreadPoolExecutor] = web.AppKey(
    "health_pinger", concurrent.futures.ThreadPoolExecutor
)


async def healthz(request: web.Request) -> web.Response:
    return liveness(request.app[STATE])


async def readyz(request: web.Request) -> web.Response:
    loop = asyncio.get_running_loop()
    ping = loop.run_in_executor(request.app[PINGER], request.app[STATE].redis.ping)
    try:
        async with asyncio.timeout(PING_SECONDS):
            redis_ok = bool(await ping)
    except (redis.RedisError, OSError, TimeoutError):
        redis_ok = False
    return readiness(request.app[STATE], redis_ok)


def health_app(state: ApiState) -> web.Application:
    app = web.Application(client_max_size=1024)
    app[STATE] = state
    app[PINGER] = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="agentihooks-health")
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)

    async def close_pinger(app: web.Application) -> None:
        app[PINGER].shutdown(wait=False, cancel_futures=True)

    app.on_cleanup.append(close_pinger)
    return app


async def start_health_listener(state: ApiState, host: str, port: int) -> ControlServer:
    """Serve ``/healthz`` and ``/readyz`` on ``host:port`` (0 picks a free port)."""
    return await serve(health_app(state), host, port, LIMITS, shutdown_timeout=1.0)
