"""The control API served by the real operator process (kopf on the real control plane, real Redis).

The operator publishes each Swarm it recovers to the API; the master's
credential comes from the Secret the Swarm names, read by the operator's own
identity (the chart's RBAC, a TokenRequest token); the operator token from the
environment, hashed at start. The seat the API reports is the Pod the real API
server admitted (Pod Security ``restricted``) and the simulated kubelet runs.
"""

from __future__ import annotations

import base64
import secrets
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from agentihooks_operator.api.access.endpoints import Endpoints, endpoints_key
from testsupport import kubelet as kl
from testsupport.kube import eventually, operator_process
from testsupport.node import RealKubelet
from testsupport.realcluster import RealCluster

MASTER = "master@example-1"
NODE = "kind-worker"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spec() -> dict[str, Any]:
    return {
        "image": "ghcr.io/agentihooks/worker:2.1.0",
        "harness": {"name": "claude", "command": ["claude", "-p", "work"]},
        "seats": [
            {"name": "eng-1", "project": "github.com/acme/app", "task": {"id": "t-1", "text": "task 1"}}
        ],
        "masters": [{"agent": MASTER, "credentialSecret": "master-1"}],
        "recovery": {"automation": True, "passIntervalSeconds": 0.5},
    }


async def test_operator_process_serves_the_api_for_its_swarms(
    real_cluster: RealCluster,
    real_kubelet: RealKubelet,
    redis_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster, ns = real_cluster, real_cluster.namespace
    port = free_port()
    operator_token, master_token = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    monkeypatch.setenv("AGENTIHOOKS_CONTROL_HOST", "127.0.0.1")
    monkeypatch.setenv("AGENTIHOOKS_CONTROL_PORT", str(port))
    monkeypatch.setenv("AGENTIHOOKS_OPERATOR_TOKEN", operator_token)
    monkeypatch.setenv("AGENTIHOOKS_API_ADVERTISE_URL", f"http://127.0.0.1:{port}")
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "master-1", "namespace": ns},
        "data": {"token": base64.b64encode(master_token.encode()).decode()},
    }
    (await cluster.http.post(f"/api/v1/namespaces/{ns}/secrets", json=secret)).raise_for_status()
    await cluster.create_swarm("example", spec())
    url = f"http://127.0.0.1:{port}"
    registry_client = redis.Redis.from_url(redis_url)
    async with (
        operator_process(cluster, redis_url, tmp_path, operator_id="op-api"),
        httpx.AsyncClient(base_url=url, timeout=5) as http,
    ):

        async def status(token: str) -> dict[str, Any] | None:
            try:
                r = await http.get("/v1/swarms/example/status", headers={"Authorization": f"Bearer {token}"})
            except httpx.HTTPError:
                return None
            body = r.json() if r.status_code == 200 else None
            return body if body and body["seats"][0]["execution_id"] else None

        seen = await eventually(lambda: status(master_token), timeout=60, what="status for the master")
        assert seen["lease_held"] is True and seen["handoffs"] == []
        # The seat the API reports is the Pod the real API server admitted for it.
        execution_id = seen["seats"][0]["execution_id"]
        pod = await cluster.get(f"/api/v1/namespaces/{ns}/pods/swarm-{execution_id}")
        assert pod is not None, "the reported execution's Pod exists in the API"
        assert pod["metadata"]["labels"]["swarm.agentihooks.io/execution-id"] == execution_id
        await real_kubelet.set_status(pod["metadata"]["name"], kl.running(), node_name=NODE)
        assert await status(operator_token)
        ready = await http.get("/readyz")
        assert ready.status_code == 200 and ready.json()["redis"] is True
        denied = await http.get("/v1/swarms/example/status", headers={"Authorization": "Bearer someone-else"})
        assert denied.status_code == 401, "an unknown token is not authenticated"
        metrics = (await http.get("/metrics")).text
        assert f'agentihooks_lease_held{{namespace="{ns}",swarm="example"}} 1' in metrics

        async def pass_duration() -> float | None:
            text = (await http.get("/metrics")).text
            for line in text.splitlines():
                if line.startswith(f'agentihooks_pass_duration_seconds{{namespace="{ns}",swarm="example"}} '):
                    return float(line.rsplit(" ", 1)[1])
            return None

        seconds = await eventually(pass_duration, timeout=30, what="the pass duration gauge")
        assert seconds > 0

        async def still_running() -> bool:
            body = await status(master_token)
            return bool(body) and body["seats"][0]["execution_id"] == execution_id and body["handoffs"] == []

        assert await still_running(), "a running seat is not recovered"
        # It advertises where the other replicas forward the writes of the swarms it holds.
        assert Endpoints(registry_client, "agentihooks").lookup("op-api") == url
    assert registry_client.hget(endpoints_key("agentihooks"), "op-api") is None  # removed at the stop
    registry_client.close()
    # The master's credential was read from its Secret by the operator's own identity, by name.
    assert cluster.count("get", "secrets", "master-1") >= 1
    assert ("list", "", "secrets") not in cluster.operator_calls()
    log = (tmp_path / "op-api.log").read_text()
    assert operator_token not in log and master_token not in log
