"""A TLS Redis with a private CA: the product connects through ``AGENTIHOOKS_REDIS_CA_FILE`` and holds a
lease over it; without the bundle the certificate is refused; a bad setting is refused before any
connection. A real ``redis-server`` serving TLS with a certificate the test's own CA signed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from agentihooks_checkpoint.stores.local import LocalStore
from agentihooks_demo.pki import Authority
from agentihooks_operator.cli.main import app
from agentihooks_operator.k8s.config import OperatorConfig, connect_redis
from agentihooks_operator.recovery import Recovery
from agentihooks_operator.redisconn import connect
from testsupport.recovery import MemoryLauncher
from testsupport.redis_server import RedisServer, free_port
from typer.testing import CliRunner


@pytest.fixture
def tls_redis(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(the rediss:// URL, the CA bundle) of a redis-server that serves TLS only to clients that check."""
    ca = Authority(tmp_path / "pki")
    pair = ca.issue("redis", "redis", server=True, hosts=("127.0.0.1", "localhost"))
    port = free_port()
    tls = ["--tls-port", str(port), "--tls-cert-file", str(pair.cert), "--tls-key-file", str(pair.key)]
    tls += ["--tls-ca-cert-file", str(ca.cert), "--tls-auth-clients", "no"]
    server = RedisServer(tmp_path / "data", extra_args=tls)  # its plain port only for start()'s PING
    server.start()
    try:
        yield f"rediss://127.0.0.1:{port}/0", ca.cert
    finally:
        server.stop()


def test_the_operator_holds_a_lease_over_tls_with_its_ca(
    tls_redis: tuple[str, Path], store: LocalStore
) -> None:
    url, ca = tls_redis
    client = connect_redis(OperatorConfig(redis_url=url, redis_ca_file=str(ca), operator_id="op-tls"))
    try:
        assert client.ping()
        recovery = Recovery(
            client, "swarm-a", holder="op-tls", catalog=store, launcher=MemoryLauncher(), namespace="ns"
        )
        assert recovery.acquire() and recovery.epoch == 1
        assert recovery.lease_holder() == "op-tls"
    finally:
        client.close()


def test_without_the_ca_the_certificate_is_refused(tls_redis: tuple[str, Path]) -> None:
    url, _ = tls_redis
    client = connect(url)
    with pytest.raises(redis.ConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
        client.ping()
    client.close()


def test_a_bad_ca_setting_is_refused_before_connecting(tls_redis: tuple[str, Path], tmp_path: Path) -> None:
    url, ca = tls_redis
    with pytest.raises(ValueError, match="cannot be read"):
        connect(url, ca_file=str(tmp_path / "missing.crt"))
    junk = tmp_path / "junk.crt"
    junk.write_text("not a certificate\n")
    with pytest.raises(ValueError, match="holds no PEM certificate"):
        connect(url, ca_file=str(junk))
    with pytest.raises(ValueError, match="the URL has no TLS"):
        connect(url.replace("rediss://", "redis://"), ca_file=str(ca))


def test_the_admin_cli_reaches_a_tls_redis_with_the_ca(tls_redis: tuple[str, Path]) -> None:
    url, ca = tls_redis
    args = ["admin", "migrate-keys", "example", "-n", "team-a", "--redis-url", url]
    ok = CliRunner().invoke(app, [*args, "--redis-ca-file", str(ca)])
    assert ok.exit_code == 0, ok.output
    assert "nothing to migrate" in ok.output
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code != 0 and "CERTIFICATE_VERIFY_FAILED" in refused.output
    assert "Traceback" not in refused.output
