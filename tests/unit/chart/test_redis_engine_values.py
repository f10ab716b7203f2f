"""The chart points the operator at a Redis Cluster or at Sentinel, in settings the operator accepts.

Each rendered ``AGENTIHOOKS_REDIS_*`` value is loaded by the operator's own
settings class, so a URL the chart lets through is one the operator can use.
"""

from __future__ import annotations

from typing import Any

import pytest
from agentihooks_operator.k8s.config import OperatorConfig
from agentihooks_operator.redisconn import parse
from testsupport.helm import Helm, one, value_sets


def _env(helm: Helm, values: Any) -> dict[str, dict[str, Any]]:
    container = one(helm.render(values), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e for e in container["env"]}


def _config(env: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> OperatorConfig:
    for name, e in env.items():
        if name.startswith("AGENTIHOOKS_REDIS") and "value" in e:
            monkeypatch.setenv(name, e["value"])
    return OperatorConfig()


def test_a_sentinel_url_with_wait_and_the_sentinels_password(
    helm: Helm, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = _env(helm, value_sets()["redis-sentinel"])
    assert env["AGENTIHOOKS_REDIS_SENTINEL_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "agentihooks-redis-sentinel",
        "key": "password",
    }
    assert env["AGENTIHOOKS_REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "agentihooks-redis"
    config = _config(env, monkeypatch)
    target = parse(config.redis_url)
    assert (target.mode, target.master, len(target.nodes)) == ("sentinel", "agentihooks", 3)
    assert (config.redis_wait_replicas, config.redis_wait_timeout_ms) == (1, 2000)


def test_a_cluster_url_without_wait(helm: Helm, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _env(helm, value_sets()["redis-cluster"])
    assert "AGENTIHOOKS_REDIS_WAIT_REPLICAS" not in env and "AGENTIHOOKS_REDIS_SENTINEL_PASSWORD" not in env
    target = parse(_config(env, monkeypatch).redis_url)
    assert (target.mode, target.tls, len(target.nodes)) == ("cluster", True, 2)


@pytest.mark.parametrize(
    ("external", "message"),
    [
        ({"url": "redis+cluster://a:6379", "waitReplicas": 1}, "not supported on a Redis Cluster"),
        (
            {"url": "redis://a:6379/0", "sentinelAuth": {"existingSecret": "s"}},
            "sentinelAuth is for Sentinel",
        ),
        ({"url": "redis+sentinel://u:pw@s:26379/m"}, "must not carry a password"),
        ({"url": "mongodb://a"}, "does not match pattern"),
        ({"url": "redis://a:6379/0", "waitReplicas": -1}, "minimum"),
    ],
)
def test_unusable_redis_values_are_refused(helm: Helm, external: dict[str, Any], message: str) -> None:
    res = helm.template({"redis": {"mode": "external", "external": external}})
    assert res.returncode != 0 and message in res.stderr


def test_wait_needs_an_external_redis_with_replicas(helm: Helm) -> None:
    res = helm.template({"redis": {"external": {"waitReplicas": 1}}})
    assert res.returncode != 0 and "the embedded Redis has none" in res.stderr
