"""``AGENTIHOOKS_REDIS_URL`` and the WAIT settings: each Redis mode parses, bad ones name the setting.

Pure: no client connects (redis-py clients connect lazily; the Sentinel and
Cluster ones are never built here). Real servers are in
tests/integration/recovery/test_redis_cluster.py and test_redis_sentinel.py.
"""

from __future__ import annotations

import pytest
import redis
from agentihooks_operator.k8s.config import OperatorConfig, connect_redis
from agentihooks_operator.recovery.store.durable import Durability, attach, attached
from agentihooks_operator.redisconn import RedisTarget, connect, parse
from pydantic import ValidationError


def test_each_mode_is_read_from_the_url() -> None:
    assert parse("redis://h:6379/2") == RedisTarget("standalone", "redis://h:6379/2")
    assert parse("unix:///run/redis.sock").mode == "standalone"
    cluster = parse("redis+cluster://a:7000,b:7001")
    assert (cluster.mode, cluster.nodes, cluster.tls, cluster.db) == (
        "cluster",
        (("a", 7000), ("b", 7001)),
        False,
        0,
    )
    sentinel = parse("rediss+sentinel://u:p%40ss@s1:26379,s2:26380/mymaster/3")
    assert (sentinel.mode, sentinel.master, sentinel.db, sentinel.tls) == ("sentinel", "mymaster", 3, True)
    assert sentinel.nodes == (("s1", 26379), ("s2", 26380))
    assert (sentinel.username, sentinel.password) == ("u", "p@ss")


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("localhost:6379", "not a URL"),
        ("http://h:1", "unknown scheme 'http'"),
        ("redis+cluster://", "names no host:port"),
        ("redis+cluster://a:7000/1", "only database 0"),
        ("redis+cluster://a", "'a' is not host:port"),
        ("redis+cluster://a:99999", "is not host:port"),
        ("redis+sentinel://s:26379", "ends with the master's name"),
        ("redis+sentinel://s:26379/m/x", "only be a database number"),
    ],
)
def test_a_bad_url_names_the_setting_and_the_fault(url: str, why: str) -> None:
    with pytest.raises(ValueError, match="AGENTIHOOKS_REDIS_URL") as info:
        parse(url)
    assert why in str(info.value)
    with pytest.raises(ValidationError, match="AGENTIHOOKS_REDIS_URL"):
        OperatorConfig(redis_url=url)


def test_a_password_in_a_bad_url_is_never_echoed() -> None:
    with pytest.raises(ValueError) as info:
        parse("redis+cluster://user:hunter2@a:7000/5")
    assert "hunter2" not in str(info.value)


def test_wait_settings_attach_to_the_operators_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTIHOOKS_REDIS_URL", "redis://127.0.0.1:1/0")
    monkeypatch.setenv("AGENTIHOOKS_REDIS_WAIT_REPLICAS", "2")
    monkeypatch.setenv("AGENTIHOOKS_REDIS_WAIT_TIMEOUT_MS", "250")
    client = connect_redis(OperatorConfig())
    assert isinstance(client, redis.Redis) and attached(client) == Durability(2, 250)
    assert attached(connect("redis://127.0.0.1:1/0")) is None, "no WAIT unless asked"
    monkeypatch.setenv("AGENTIHOOKS_REDIS_WAIT_REPLICAS", "-1")
    with pytest.raises(ValidationError, match="redis_wait_replicas"):
        OperatorConfig()


def test_wait_on_a_cluster_is_refused_with_the_alternative() -> None:
    with pytest.raises(ValueError, match=r"AGENTIHOOKS_REDIS_WAIT_REPLICAS.*min-replicas-to-write"):
        connect("redis+cluster://127.0.0.1:1", durability=Durability(1, 100))


def test_a_cluster_client_takes_no_durability() -> None:
    from redis.cluster import RedisCluster

    unconnected = RedisCluster.__new__(RedisCluster)  # the check needs the type only, no cluster
    with pytest.raises(ValueError, match="min-replicas-to-write"):
        attach(unconnected, Durability(1, 100))


def test_a_durability_needs_a_replica_and_a_timeout() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Durability(0, 100)
    with pytest.raises(ValueError, match="block forever"):
        Durability(1, 0)
