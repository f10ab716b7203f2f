"""A live control API over a real Redis and a real local checkpoint store, with two swarms.

Swarm ``swarm-a`` has master ``master@example-1``; ``swarm-b`` has
``master@example-2``. Each seat's generation 1 is admitted and running; tests
fail attempts through real recovery passes.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores.local import LocalStore
from agentihooks_operator.api import ApiState, SwarmRegistry
from agentihooks_operator.api.auth import sha256_hex
from agentihooks_operator.recovery import LaunchPlan, Recovery
from agentihooks_operator.swarm import SwarmSpec
from testsupport.checkpoints import BuiltCheckpoint, build_checkpoint
from testsupport.control_api import Secrets, live_api, swarm_with_masters
from testsupport.recovery import MemoryLauncher, observe

MASTER_A = "master@example-1"
MASTER_B = "master@example-2"


@dataclass
class World:
    url: str
    client: redis.Redis
    store: LocalStore
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

    def checkpoint(self, execution_id: str, *, kind: str = "claude", **kw: Any) -> BuiltCheckpoint:
        self.built += 1
        kw.setdefault("checkpoint_id", f"ckpt-{self.built}")
        kw.setdefault("sequence", self.built)
        if kind != "context":
            kw.setdefault("session_id", "sess-1")
        scope = StoreScope(
            swarm=kw.pop("swarm", "swarm-a"), task_id=kw.pop("task_id", "task-1"), task_generation=1
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


@pytest.fixture
def world(redis_url: str, tmp_path: Path) -> Iterator[World]:
    client = redis.Redis.from_url(redis_url)
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
    with live_api(state) as server:
        w = World(server.url, client, store, launcher, registry, state, tmp_path, tokens)
        for swarm, master, secret in (("swarm-a", MASTER_A, "master-a"), ("swarm-b", MASTER_B, "master-b")):
            spec = swarm_with_masters({master: secret})
            r = Recovery(client, swarm, holder="ctl-a", catalog=store, launcher=launcher)
            w.first[swarm] = r.ensure_seats(spec)[0]
            r.report_session(w.first[swarm].execution_id, "sess-1")
            r.report_watermark(w.first[swarm].execution_id, 5)
            registry.publish(swarm, r, spec, holder="ctl-a")
            w.recoveries[swarm], w.specs[swarm] = r, spec
        yield w
    client.close()
