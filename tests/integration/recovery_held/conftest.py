"""Fixtures of the held-recovery tests: real Redis, a real HTTP account broker, an injectable clock."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from agentihooks_operator.recovery import HttpBrokers, Recovery
from agentihooks_operator.swarm import SwarmSpec
from testsupport.broker import Broker, Clock, running_broker, with_broker
from testsupport.recovery import FixedCatalog, MemoryLauncher, swarm_spec

SWARM = "swarm-h"


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


@pytest.fixture
def credential() -> str:
    return "bk-" + secrets.token_urlsafe(16)


@pytest.fixture
def broker(credential: str) -> Iterator[Broker]:
    with running_broker(credential) as b:
        yield b


@pytest.fixture
def launcher() -> MemoryLauncher:
    return MemoryLauncher()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make(
    client: redis.Redis, launcher: MemoryLauncher, clock: Clock, credential: str
) -> Callable[..., Recovery]:
    """``make(holder="ctl-a", **overrides)``: a controller (a restart is simply another call)."""

    def factory(holder: str = "ctl-a", **kw: Any) -> Recovery:
        kw.setdefault("catalog", FixedCatalog())
        kw.setdefault("launcher", launcher)
        kw.setdefault("clock", clock)
        kw.setdefault("brokers", HttpBrokers({"broker-cred": credential}.get))
        return Recovery(client, SWARM, holder=holder, **kw)

    return factory


@pytest.fixture
def spec(broker: Broker) -> SwarmSpec:
    return with_broker(swarm_spec(1), broker.url)
