"""Fixtures of the recovery-core integration tests: real Redis, a real local checkpoint store."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores.local import LocalStore
from agentihooks_operator.recovery import Recovery
from testsupport.checkpoints import BuiltCheckpoint, build_checkpoint
from testsupport.recovery import MemoryLauncher, swarm_spec

SWARM = "swarm-a"
TAG = "v1"


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    root = tmp_path / "store"
    root.mkdir()
    return LocalStore(root)


@pytest.fixture
def launcher() -> MemoryLauncher:
    return MemoryLauncher()


@pytest.fixture
def make(client: redis.Redis, store: LocalStore, launcher: MemoryLauncher) -> Callable[..., Recovery]:
    """``make(holder="ctl-a", **overrides)``: a Recovery on the test's Redis, store and launcher."""

    def factory(holder: str = "ctl-a", **kw: Any) -> Recovery:
        kw.setdefault("catalog", store)
        kw.setdefault("launcher", launcher)
        c = kw.pop("client", client)
        return Recovery(c, SWARM, holder=holder, **kw)

    return factory


@pytest.fixture
def checkpoint(store: LocalStore, tmp_path: Path) -> Callable[..., BuiltCheckpoint]:
    """``checkpoint(execution_id, kind=..., session_id=..., key=TAG)``: a real committed checkpoint."""
    count = [0]

    def factory(execution_id: str, *, kind: str = "claude", key: str = TAG, **kw: Any) -> BuiltCheckpoint:
        count[0] += 1
        scope = StoreScope(swarm=SWARM, task_id=kw.pop("task_id", "task-1"), task_generation=1)
        kw.setdefault("checkpoint_id", f"ckpt-{count[0]}")
        kw.setdefault("sequence", count[0])
        return build_checkpoint(
            store,
            scope,
            tmp_path / f"ckpt-{count[0]}",
            kind=kind,  # type: ignore[arg-type]
            execution_id=execution_id,
            compatibility_key=key,
            **kw,
        )

    return factory


@pytest.fixture
def spec():  # type: ignore[no-untyped-def]
    return swarm_spec(1, tag=TAG)
