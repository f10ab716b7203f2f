"""Fixtures of the recovery-core integration tests: real Redis (one server, and a real Redis
Cluster: each test on ``client`` runs on both), a real local checkpoint store."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores.local import LocalStore
from agentihooks_operator.recovery import Recovery
from agentihooks_operator.redisconn import connect
from redis.cluster import RedisCluster
from testsupport.checkpoints import BuiltCheckpoint, build_checkpoint
from testsupport.recovery import MemoryLauncher, swarm_spec

SWARM = "swarm-a"
TAG = "v1"


#: Arguments that tie a test to one standalone server (it counts that server's round trips, or
#: kills and restarts it): such a test runs on standalone Redis only.
STANDALONE_ONLY = {"redis_url", "private_redis"}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test on the ``client`` fixture runs twice: on one redis-server and on a real
    three-primary Redis Cluster (``[cluster]``), through the product's own connection factory."""
    if "redis_engine" not in metafunc.fixturenames:
        return
    direct = set(inspect.signature(metafunc.function).parameters)
    engines = ["standalone"] if direct & STANDALONE_ONLY else ["standalone", "cluster"]
    metafunc.parametrize("redis_engine", engines)


@pytest.fixture
def client(redis_engine: str, request: pytest.FixtureRequest) -> Iterator[redis.Redis]:
    if redis_engine == "cluster":
        cluster = request.getfixturevalue("redis_cluster")
        cluster.flush()
        c = connect(cluster.url)
        assert isinstance(c, RedisCluster)  # the factory chose the cluster client from the URL
    else:
        c = connect(request.getfixturevalue("redis_url"))
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
