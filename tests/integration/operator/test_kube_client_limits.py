"""The recovery client's limits over real HTTP: connections kept for a burst, a rate that waits, and the
chart's FlowSchema putting the operator's requests in their own flows on a real API server."""

from __future__ import annotations

import contextlib
import http.server
import json
import ssl
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from agentihooks_operator.k8s.client import KubeClient
from agentihooks_operator.k8s.throttle import ClientLimits
from testsupport.helm import one


class KeepAlive(http.server.BaseHTTPRequestHandler):
    """Answers every GET with ``{}`` after a short delay, keeping the connection open (HTTP/1.1)."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        time.sleep(0.05)  # calls of one burst overlap
        raw = json.dumps({}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *_: Any) -> None:
        pass


@contextlib.contextmanager
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), KeepAlive)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def connections_opened(limits: ClientLimits | None, bursts: int = 3, calls: int = 24) -> int:
    with server() as url:
        kube = KubeClient(url, token="t", limits=limits)
        try:
            with ThreadPoolExecutor(max_workers=calls) as pool:
                for _ in range(bursts):
                    list(pool.map(lambda i: kube.get("pods", "ns", f"p-{i}"), range(calls)))
            pool_of_host = kube._api.rest_client.pool_manager.connection_from_url(url)
            return int(pool_of_host.num_connections)
        finally:
            kube.close()


def test_a_burst_of_calls_reuses_the_connections_it_opened() -> None:
    """The default keeps 64 connections: three bursts of 24 concurrent calls open at most 24. With the
    ``kubernetes`` package's own small pool, every call past it opens (and drops) a connection."""
    kept = connections_opened(None)
    assert kept <= 24, f"{kept} connections opened for bursts of 24"
    few = connections_opened(ClientLimits(connections=2))
    assert few > 3 * 24 // 2, f"only {few} connections opened with a pool of 2"


def test_a_rate_makes_callers_wait_for_a_token_never_fail() -> None:
    slept: list[float] = []
    with server() as url:
        # One token a second, two saved; the sleep is recorded, not slept (each call still takes
        # the server's 50 ms, which refills a twentieth of a token).
        kube = KubeClient(url, token="t", limits=ClientLimits(qps=1, burst=2), sleep=slept.append)
        try:
            for i in range(4):
                assert kube.get("pods", "ns", f"p-{i}") == {}
        finally:
            kube.close()
    assert len(slept) == 2, slept  # the two saved tokens served the first two calls at once
    assert 0.5 < slept[0] <= 1 and slept[0] + 0.5 < slept[1] <= 2, slept


def test_the_charts_flowschema_gives_the_operator_flows_of_its_own(
    control_plane: Any, session_helm: Any, tmp_path: Path
) -> None:
    """Installed as rendered, the chart's FlowSchema is the one the real API server classifies the
    operator's requests by (it names it in each answer's ``X-Kubernetes-PF-FlowSchema-UID``), in the
    ``workload-high`` priority level; another account's requests are not in it."""
    import asyncio

    from testsupport.realcluster import RealCluster

    cluster = RealCluster.create(control_plane, session_helm, tmp_path, prefix="apf")
    account = cluster.operator_user.rsplit(":", 1)[1]
    res = session_helm.template({"serviceAccount": {"name": account}}, namespace=cluster.namespace)
    assert res.returncode == 0, res.stderr
    flow = one(res.docs(), "FlowSchema")
    subject = flow["spec"]["rules"][0]["subjects"][0]["serviceAccount"]
    assert subject == {"name": account, "namespace": cluster.namespace}
    schemas = "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas"
    levels = "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations"
    with control_plane.client() as admin:
        made = admin.post(schemas, json=flow)
        assert made.status_code == 201, made.text
        uid = made.json()["metadata"]["uid"]
        high = admin.get(f"{levels}/workload-high").json()["metadata"]["uid"]
    pods = f"/api/v1/namespaces/{cluster.namespace}/pods"
    try:
        with httpx.Client(
            base_url=cluster.url,
            verify=ssl.create_default_context(cafile=str(control_plane.ca.cert)),  # no admin cert
            headers={"Authorization": f"Bearer {cluster.token}"},
        ) as operator:
            deadline = time.monotonic() + 30  # the API server's flow-control config follows its informer
            while True:
                answer = operator.get(pods)
                assert answer.status_code == 200, answer.text
                if answer.headers.get("X-Kubernetes-PF-FlowSchema-UID") == uid:
                    break
                if time.monotonic() > deadline:
                    pytest.fail(f"the operator's requests are still classified as {answer.headers}")
                time.sleep(0.2)
            assert answer.headers["X-Kubernetes-PF-PriorityLevel-UID"] == high
        with control_plane.client() as admin:
            assert admin.get(pods).headers.get("X-Kubernetes-PF-FlowSchema-UID") != uid
    finally:
        with control_plane.client() as admin:
            admin.delete(f"{schemas}/{flow['metadata']['name']}")
        asyncio.run(cluster.close())
