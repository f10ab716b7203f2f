"""The embedded Redis the chart renders really runs with append-only persistence and its password.

The container command is taken from the rendered StatefulSet and run with a real redis-server
(only the port and the data folder are moved to this machine's loopback and a temp folder), then
killed without warning and started again: acknowledged writes survive.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path

import pytest
import redis
from testsupport.chart_redis import ChartRedis, path_with_redis, rendered_command
from testsupport.helm import Helm, one
from testsupport.redis_server import free_port

PASSWORD = "correct horse battery staple"
_command = rendered_command
_Running = ChartRedis


@pytest.fixture
def redis_env(tmp_path: Path) -> dict[str, str]:
    return path_with_redis(tmp_path / "bin")


def test_aof_survives_a_kill_and_password_is_required(
    helm: Helm, tmp_path: Path, redis_env: dict[str, str]
) -> None:
    port, data = free_port(), tmp_path / "data"
    data.mkdir()
    argv = _command(helm, {"redis": {"auth": {"existingSecret": "agentihooks-redis"}}}, port, data)
    server = _Running(argv, {**redis_env, "REDIS_PASSWORD": PASSWORD}, port, PASSWORD)
    server.start()
    try:
        anonymous = redis.Redis(port=port, socket_timeout=2)
        with pytest.raises(redis.AuthenticationError):
            anonymous.set("k", "v")
        client = redis.Redis(port=port, password=PASSWORD, socket_timeout=2)
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        assert client.config_get("appendfsync") == {"appendfsync": "everysec"}
        client.set("agentihooks:swarm:{example}:control-epoch", 7)
        # Redis appends to the AOF before it answers, so a SIGKILL right after the reply loses nothing.
        server.kill()
        server.start()
        assert client.get("agentihooks:swarm:{example}:control-epoch") == b"7"
    finally:
        server.kill()


def test_by_default_redis_requires_the_generated_password(
    helm: Helm, tmp_path: Path, redis_env: dict[str, str]
) -> None:
    """No Secret named: the chart's generated password is required (protected mode on); a client
    without it is refused."""
    port = free_port()
    docs = helm.render({})
    generated = base64.b64decode(one(docs, "Secret")["data"]["redis-password"]).decode()
    argv = _command(helm, {}, port, tmp_path)
    server = _Running(argv, {**redis_env, "REDIS_PASSWORD": generated}, port, generated)
    server.start()
    try:
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=port, socket_timeout=2).set("k", "v")
        client = redis.Redis(port=port, password=generated, socket_timeout=2)
        assert client.ping()
        assert client.config_get("protected-mode") == {"protected-mode": "yes"}
    finally:
        server.kill()


def test_auth_off_runs_without_password(helm: Helm, tmp_path: Path, redis_env: dict[str, str]) -> None:
    """``redis.auth.enabled=false`` is the explicit opt-out: no password, protected mode off."""
    port = free_port()
    values = {"redis": {"auth": {"enabled": False}}}
    argv = _command(helm, values, port, tmp_path)
    assert (
        one(helm.render(values), "StatefulSet")["spec"]["template"]["spec"]["containers"][0].get("env")
        is None
    )
    server = _Running(argv, redis_env, port, None)
    server.start()
    try:
        assert redis.Redis(port=port, socket_timeout=2).ping()
    finally:
        server.kill()


@pytest.mark.skipif(shutil.which("redis-cli") is None, reason="redis-cli is not installed")
def test_probe_command_authenticates_from_the_environment(
    helm: Helm, tmp_path: Path, redis_env: dict[str, str]
) -> None:
    port = free_port()
    values = {"redis": {"auth": {"existingSecret": "s"}}}
    container = one(helm.render(values), "StatefulSet")["spec"]["template"]["spec"]["containers"][0]
    env_names = [e["name"] for e in container["env"]]
    assert env_names == ["REDIS_PASSWORD", "REDISCLI_AUTH"]
    server = _Running(
        _command(helm, values, port, tmp_path), {**redis_env, "REDIS_PASSWORD": PASSWORD}, port, PASSWORD
    )
    server.start()
    try:
        probe = container["readinessProbe"]["exec"]["command"]
        script = probe[2].replace("-h 127.0.0.1", f"-h 127.0.0.1 -p {port}")
        ok = subprocess.run(["sh", "-c", script], env={**redis_env, "REDISCLI_AUTH": PASSWORD})
        assert ok.returncode == 0
        bad = subprocess.run(
            ["sh", "-c", script], env={**redis_env, "REDISCLI_AUTH": "wrong"}, capture_output=True
        )
        assert bad.returncode != 0
    finally:
        server.kill()
