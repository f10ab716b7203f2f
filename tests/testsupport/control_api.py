"""A live control API for tests: the real aiohttp server on loopback, in its own thread and event loop.

Tests (and the CLI through ``CliRunner``) call it over real HTTP with blocking
clients, so the server needs a loop of its own. ``swarm_with_masters`` builds
a Swarm spec with registered masters; ``Secrets`` plays the Kubernetes Secrets
the masters' credentials live in.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import redis
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores.base import CheckpointStore
from agentihooks_checkpoint.stores.local import LocalStore
from agentihooks_operator.api import ApiState, ControlServer, SwarmRegistry, start_control_api
from agentihooks_operator.api.access.auth import sha256_hex
from agentihooks_operator.api.limits import ServerLimits
from agentihooks_operator.recovery import CrashAt, InjectedFault, LaunchPlan, Recovery
from agentihooks_operator.swarm import SwarmSpec

from testsupport.checkpoints import BuiltCheckpoint, build_checkpoint
from testsupport.recovery import MemoryLauncher, observe, swarm_doc


def swarm_with_masters(
    masters: dict[str, str], *, seats: int = 1, tag: str = "v1", automation: bool = True
) -> SwarmSpec:
    """A spec like ``testsupport.recovery.swarm_spec`` whose masters are ``agent → Secret name``."""
    doc = swarm_doc(seats, tag=tag, automation=automation)
    doc["masters"] = [{"agent": a, "credentialSecret": s} for a, s in masters.items()]
    return SwarmSpec.model_validate(doc)


class Secrets:
    """``(namespace, name) → token`` as a Kubernetes Secret store would answer; counts reads."""

    def __init__(self, tokens: dict[str, str] | None = None, namespace: str = "default") -> None:
        self.tokens = {(namespace, k): v for k, v in (tokens or {}).items()}
        self.reads = 0

    def __call__(self, namespace: str, name: str) -> str | None:
        self.reads += 1
        return self.tokens.get((namespace, name))


@contextmanager
def served_in_thread(
    start: Callable[[], Coroutine[Any, Any, ControlServer]], name: str = "control-api"
) -> Iterator[ControlServer]:
    """The server ``start()`` makes, running on its own event loop in a background thread until the
    block ends (then stopped, and the loop closed)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name=name, daemon=True)
    thread.start()
    started: Future[Any] = asyncio.run_coroutine_threadsafe(start(), loop)
    server: ControlServer = started.result(timeout=30)
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        loop.close()


@contextmanager
def live_api(state: ApiState, limits: ServerLimits | None = None) -> Iterator[ControlServer]:
    """Serve ``state`` on 127.0.0.1 (free port) in a background thread until the block ends.

    ``limits`` default to the ``AGENTIHOOKS_CONTROL_*`` settings of the environment, as in the operator.
    """
    with served_in_thread(lambda: start_control_api(state, "127.0.0.1", 0, limits)) as server:
        yield server


MASTER_A = "master@example-1"
MASTER_B = "master@example-2"


@dataclass
class World:
    url: str
    server: ControlServer
    client: redis.Redis
    store: CheckpointStore
    launcher: MemoryLauncher
    registry: SwarmRegistry
    state: ApiState
    tmp: Path
    tokens: dict[str, str]
    recoveries: dict[str, Recovery] = field(default_factory=dict)
    specs: dict[str, SwarmSpec] = field(default_factory=dict)
    first: dict[str, LaunchPlan] = field(default_factory=dict)
    built: int = 0

    def http(self, token: str | None = None, **headers: str) -> httpx.Client:
        h = dict(headers)
        if token is not None:
            h["Authorization"] = f"Bearer {token}"
        return httpx.Client(base_url=self.url, headers=h, timeout=30)

    def call(self, method: str, path: str, token: str | None = None, **kw: Any) -> httpx.Response:
        with self.http(token) as c:
            return c.request(method, path, **kw)

    def worker_token(self, execution_id: str) -> str:
        return self.launcher.pods[execution_id].worker_token.get_secret_value()

    def fail(self, swarm: str = "swarm-a", *, paused: bool = True, reason: str = "oom_killed") -> str:
        """Fail seat eng-1's generation 1 so it waits for a decision; returns its execution id."""
        r, spec, plan = self.recoveries[swarm], self.specs[swarm], self.first[swarm]
        if paused:
            r.pause()
        report = r.reconcile(
            spec, observe([(plan.execution_id, "eng-1", 1)], failed={plan.execution_id: reason})
        )
        assert plan.execution_id in report.fenced
        return plan.execution_id

    def fail_before_decide(self, swarm: str = "swarm-a") -> tuple[Recovery, str]:
        """Fail eng-1 (paused) with a controller that crashes just before the decide step.

        The fence and its releases are written, the decision record is not. The crashing
        controller is published to the API in place of the first one and works normally after
        the crash (a restarted controller); returns it and the fenced execution id.
        """
        spec, plan = self.specs[swarm], self.first[swarm]
        self.recoveries[swarm].pause()
        crashing = Recovery(
            self.client,
            swarm,
            holder="ctl-a",
            catalog=self.store,
            launcher=self.launcher,
            faults=CrashAt("before:decide"),
            namespace="default",
        )
        self.registry.publish(swarm, crashing, spec, holder="ctl-a")
        self.recoveries[swarm] = crashing
        obs = observe([(plan.execution_id, "eng-1", 1)], failed={plan.execution_id: "oom_killed"})
        try:
            crashing.reconcile(spec, obs)
        except InjectedFault:
            return crashing, plan.execution_id
        raise AssertionError("the pass did not reach the decide step")

    def checkpoint(self, execution_id: str, *, kind: str = "claude", **kw: Any) -> BuiltCheckpoint:
        self.built += 1
        kw.setdefault("checkpoint_id", f"ckpt-{self.built}")
        kw.setdefault("sequence", self.built)
        if kind != "context":
            kw.setdefault("session_id", "sess-1")
        scope = StoreScope(
            swarm=kw.pop("swarm", "swarm-a"),
            task_id=kw.pop("task_id", "task-1"),
            task_generation=1,
            namespace=kw.pop("namespace", "default"),  # the world's swarms: namespaced, as the operator's
        )
        return build_checkpoint(
            self.store,
            scope,
            self.tmp / f"ckpt-{self.built}",
            kind=kind,  # type: ignore[arg-type]
            execution_id=execution_id,
            compatibility_key="v1",
            **kw,
        )


@contextmanager
def make_world(
    redis_url: str,
    tmp_path: Path,
    limits: ServerLimits | None = None,
    *,
    store: CheckpointStore | None = None,
    progress: bool = True,
) -> Iterator[World]:
    """Two swarms (``swarm-a``, ``swarm-b``) on a live API; see ``tests/integration/api``.

    ``store`` is the controller's catalog and store (default: a local root at ``tmp_path/store``);
    with ``progress`` the first attempts are reported as holding ``sess-1`` archived to record 5
    (off: only what their workers report)."""
    client = redis.Redis.from_url(redis_url)
    if store is None:
        root = tmp_path / "store"
        root.mkdir()
        store = LocalStore(root)
    launcher = MemoryLauncher()
    tokens = {
        "operator": "op-" + secrets.token_urlsafe(24),
        MASTER_A: "ma-" + secrets.token_urlsafe(24),
        MASTER_B: "mb-" + secrets.token_urlsafe(24),
    }
    registry = SwarmRegistry(Secrets({"master-a": tokens[MASTER_A], "master-b": tokens[MASTER_B]}))
    state = ApiState(
        registry=registry,
        redis=client,
        operator_hash=sha256_hex(tokens["operator"]),
        catalog=store,
        store=store,
        events_poll_seconds=0.1,
    )
    with live_api(state, limits) as server:
        w = World(server.url, server, client, store, launcher, registry, state, tmp_path, tokens)
        for swarm, master, secret in (("swarm-a", MASTER_A, "master-a"), ("swarm-b", MASTER_B, "master-b")):
            spec = swarm_with_masters({master: secret})
            r = Recovery(client, swarm, holder="ctl-a", catalog=store, launcher=launcher, namespace="default")
            w.first[swarm] = r.ensure_seats(spec)[0]
            if progress:
                r.report_session(w.first[swarm].execution_id, "sess-1")
                r.report_watermark(w.first[swarm].execution_id, 5)
            registry.publish(swarm, r, spec, holder="ctl-a")
            w.recoveries[swarm], w.specs[swarm] = r, spec
        yield w
    client.close()
