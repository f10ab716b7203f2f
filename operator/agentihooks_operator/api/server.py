"""Serving the control API on the running event loop (kopf's in the operator, a test's in tests).

:func:`start_control_api` binds and returns a :class:`ControlServer` to stop
later; :func:`run_control_api` is a blocking entry for demos and tools that run
the API without kopf around it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from aiohttp import web

from .app import create_app
from .state import ApiState


@dataclass
class ControlServer:
    runner: web.AppRunner
    host: str
    port: int

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host  # noqa: S104
        return f"http://{host}:{self.port}"

    async def stop(self) -> None:
        await self.runner.cleanup()


async def start_control_api(state: ApiState, host: str = "127.0.0.1", port: int = 8080) -> ControlServer:
    """Serve the API on ``host:port`` (port 0 picks a free one) and return the running server."""
    runner = web.AppRunner(
        create_app(state), access_log=None, handler_cancellation=True, shutdown_timeout=2.0
    )
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = port
    server = getattr(site, "_server", None)
    if server is not None and server.sockets:
        bound = int(server.sockets[0].getsockname()[1])
    return ControlServer(runner, host, bound)


def run_control_api(state: ApiState, host: str = "127.0.0.1", port: int = 8080) -> None:
    """Serve until interrupted (blocking)."""

    async def forever() -> None:
        server = await start_control_api(state, host, port)
        try:
            await asyncio.Event().wait()
        finally:
            await server.stop()

    asyncio.run(forever())
