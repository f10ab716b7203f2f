"""A live control API for tests: the real aiohttp server on loopback, in its own thread and event loop.

Tests (and the CLI through ``CliRunner``) call it over real HTTP with blocking
clients, so the server needs a loop of its own. ``swarm_with_masters`` builds
a Swarm spec with registered masters; ``Secrets`` plays the Kubernetes Secrets
the masters' credentials live in.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any

from agentihooks_operator.api import ApiState, ControlServer, start_control_api
from agentihooks_operator.swarm import SwarmSpec


def swarm_with_masters(
    masters: dict[str, str], *, seats: int = 1, tag: str = "v1", automation: bool = True
) -> SwarmSpec:
    """A spec like ``testsupport.recovery.swarm_spec`` whose masters are ``agent → Secret name``."""
    return SwarmSpec.model_validate(
        {
            "image": f"registry.example/worker:{tag}",
            "harness": {"name": "claude", "command": ["claude"]},
            "seats": [
                {
                    "name": f"eng-{i + 1}",
                    "project": "github.com/example/app",
                    "task": {"id": f"task-{i + 1}", "text": f"do thing {i + 1}"},
                }
                for i in range(seats)
            ],
            "masters": [{"agent": a, "credentialSecret": s} for a, s in masters.items()],
            "recovery": {"automation": automation},
        }
    )


class Secrets:
    """``(namespace, name) → token`` as a Kubernetes Secret store would answer; counts reads."""

    def __init__(self, tokens: dict[str, str] | None = None, namespace: str = "default") -> None:
        self.tokens = {(namespace, k): v for k, v in (tokens or {}).items()}
        self.reads = 0

    def __call__(self, namespace: str, name: str) -> str | None:
        self.reads += 1
        return self.tokens.get((namespace, name))


@contextmanager
def live_api(state: ApiState) -> Iterator[ControlServer]:
    """Serve ``state`` on 127.0.0.1 (free port) in a background thread until the block ends."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="control-api", daemon=True)
    thread.start()
    started: Future[Any] = asyncio.run_coroutine_threadsafe(start_control_api(state, "127.0.0.1", 0), loop)
    server: ControlServer = started.result(timeout=30)
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        loop.close()
