"""The operator starts from the chart's own command, arguments and environment, and its probes mean
what the chart says they mean.

The chart is rendered for the test's namespace of the real control plane, with the release whose
ServiceAccount and RBAC the namespace already holds; its Deployment is created on the real API server,
and kube-controller-manager makes its ReplicaSet and Pod (Pending: there is no scheduler). From that
Pod the container environment is built as the kubelet would: Secret values read from the real Secrets
the Pod names, ``$(VAR)`` references expanded, the Pod name from the downward API; the Pod's
ServiceAccount token comes from the TokenRequest API bound to the Pod (what its projected volume
holds). The real ``agentihooks-operator`` process is started with that, against the real API server
and a password-protected Redis started from the chart's Redis command. It does its job as that
identity (a Swarm gets its Pod, the API server refuses none of its calls), then the kubelet's view:
``/healthz`` (liveness) answers, ``/readyz`` (readiness) answers; with Redis gone readiness fails
while liveness holds (a Redis outage must not restart the operator), and readiness comes back with
Redis.
"""

from __future__ import annotations

import asyncio
import base64
import os
import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import yaml
from agentihooks_operator.api.access.endpoints import Endpoints
from agentihooks_operator.k8s.building.pods import OPERATOR_ANNOTATION
from testsupport.chart_redis import ChartRedis, path_with_redis, rendered_command
from testsupport.controlplane import write_kubeconfig
from testsupport.helm import CHART, Helm, one
from testsupport.kube import eventually
from testsupport.realcluster import RealCluster
from testsupport.redis_server import free_port

# Not URL-safe on purpose: the operator receives the password apart from its Redis URL.
PASSWORD = "p@ss:w/rd#0123?&%20=+ 456789abcdef"
SECRETS = {"agentihooks-redis": PASSWORD, "agentihooks-operator-token": "operator-token-for-tests"}
CHART_SUFFIX = "-agentihooks-recovery"

pytestmark = pytest.mark.slow


def render(helm: Helm, release: str, namespace: str, values: dict[str, Any]) -> list[dict[str, Any]]:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=helm.home, delete=False) as f:
        yaml.safe_dump(values, f)
    res = helm.run("template", release, str(CHART), "--namespace", namespace, "--values", f.name)
    if res.returncode != 0:
        pytest.fail(f"helm template failed: {res.stderr.strip()}")
    return res.docs()


async def kubelet_env(cluster: RealCluster, pod: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
    """The container environment as the kubelet builds it, from the Pod object and its Secrets."""
    env: dict[str, str] = {}
    ns = pod["metadata"]["namespace"]
    for var in container["env"]:
        source = var.get("valueFrom", {})
        if "value" in var:
            env[var["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), var["value"])
        elif "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            secret = await cluster.get(f"/api/v1/namespaces/{ns}/secrets/{ref['name']}")
            assert secret is not None, f"the Secret {ref['name']} the Pod names exists"
            env[var["name"]] = base64.b64decode(secret["data"][ref["key"]]).decode()
        elif source.get("fieldRef", {}).get("fieldPath") == "metadata.name":
            env[var["name"]] = pod["metadata"]["name"]
        elif source.get("fieldRef", {}).get("fieldPath") == "metadata.namespace":
            env[var["name"]] = ns
        elif source.get("fieldRef", {}).get("fieldPath") == "status.podIP":
            # no scheduler, no Pod network: the operator runs on loopback, so that is its Pod IP
            env[var["name"]] = (pod.get("status") or {}).get("podIP") or "127.0.0.1"
        else:
            raise AssertionError(f"unexpected env source: {var}")
    return env


async def pod_token(cluster: RealCluster, pod: dict[str, Any]) -> str:
    """A token of the Pod's ServiceAccount bound to the Pod (what the kubelet projects into it)."""
    ns, account = pod["metadata"]["namespace"], pod["spec"]["serviceAccountName"]
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {
            "expirationSeconds": 3600,
            "boundObjectRef": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod["metadata"]["name"],
                "uid": pod["metadata"]["uid"],
            },
        },
    }
    r = await cluster.http.post(f"/api/v1/namespaces/{ns}/serviceaccounts/{account}/token", json=body)
    assert r.status_code == 201, r.text
    return str(r.json()["status"]["token"])


def swarm_spec() -> dict[str, Any]:
    return {
        "image": "ghcr.io/agentihooks/worker:2.1.0",
        "harness": {"name": "claude", "command": ["claude", "-p", "work"]},
        "seats": [
            {"name": "eng-1", "project": "github.com/acme/app", "task": {"id": "t-1", "text": "task 1"}}
        ],
        "recovery": {"automation": True, "passIntervalSeconds": 0.5},
    }


async def test_operator_runs_from_the_rendered_deployment(
    helm: Helm, tmp_path: Path, real_cluster: RealCluster
) -> None:
    cluster, ns = real_cluster, real_cluster.namespace
    account = next(d for d in cluster.rbac if d["kind"] == "ServiceAccount")["metadata"]["name"]
    release = account.removesuffix(CHART_SUFFIX)  # the release whose RBAC the namespace holds
    redis_port, control_port, health_port = free_port(), free_port(), free_port()
    redis_argv = rendered_command(
        helm, {"redis": {"auth": {"existingSecret": "agentihooks-redis"}}}, redis_port, tmp_path
    )
    redis_server = ChartRedis(
        redis_argv, {**path_with_redis(tmp_path / "bin"), "REDIS_PASSWORD": PASSWORD}, redis_port, PASSWORD
    )
    redis_server.start()
    values = {
        "operator": {
            "port": control_port,
            "healthPort": health_port,
            "operatorToken": {"existingSecret": "agentihooks-operator-token"},
        },
        "rbac": {"watchNamespaces": [ns], "allowReleaseNamespace": True},
        "redis": {
            "mode": "external",
            "external": {"url": f"redis://127.0.0.1:{redis_port}/0"},
            "auth": {"existingSecret": "agentihooks-redis"},
        },
    }
    deployment = one(render(helm, release, ns, values), "Deployment")
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == account
    keys = {"agentihooks-redis": "redis-password", "agentihooks-operator-token": "token"}
    for name, value in SECRETS.items():
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": ns},
            "stringData": {keys[name]: value},
        }
        (await cluster.http.post(f"/api/v1/namespaces/{ns}/secrets", json=secret)).raise_for_status()
    r = await cluster.http.post(f"/apis/apps/v1/namespaces/{ns}/deployments", json=deployment)
    assert r.status_code == 201, f"the real API server refused the chart's Deployment: {r.text}"

    selector = ",".join(f"{k}={v}" for k, v in deployment["spec"]["selector"]["matchLabels"].items())

    async def operator_pod() -> dict[str, Any] | None:
        found = await cluster.http.get(f"/api/v1/namespaces/{ns}/pods", params={"labelSelector": selector})
        items = found.json()["items"] if found.status_code == 200 else []
        return items[0] if items else None

    # kube-controller-manager made the ReplicaSet and its Pod, admitted under Pod Security restricted
    pod = await eventually(operator_pod, timeout=60, what="the Deployment's Pod")
    spec = pod["spec"]
    container = spec["containers"][0]
    env = await kubelet_env(cluster, pod, container)
    assert env["AGENTIHOOKS_OPERATOR_ID"] == pod["metadata"]["name"]
    assert env["AGENTIHOOKS_NAMESPACES"] == ns
    assert env["AGENTIHOOKS_REDIS_PASSWORD"] == PASSWORD
    assert PASSWORD not in env["AGENTIHOOKS_REDIS_URL"], "the password travels apart from the URL"
    kubeconfig = write_kubeconfig(
        tmp_path / "pod.kubeconfig", cluster.url, cluster.plane.ca.cert, token=await pod_token(cluster, pod)
    )
    argv = [shutil.which(container["command"][0]) or container["command"][0], *container.get("args", [])]
    log = (tmp_path / "operator.log").open("wb")
    proc = subprocess.Popen(
        argv,
        env={
            **env,
            "PATH": os.environ["PATH"],
            "HOME": str(tmp_path),
            "KUBECONFIG": str(kubeconfig),
            "AGENTIHOOKS_CONTROL_HOST": "127.0.0.1",
        },
        stdout=log,
        stderr=log,
        cwd=tmp_path,
    )
    live, ready = (container[p]["httpGet"] for p in ("livenessProbe", "readinessProbe"))
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert live["port"] == ready["port"] == "health" and ports == {
        "http": control_port,
        "health": health_port,
    }
    base = f"http://127.0.0.1:{control_port}"
    probes = f"http://127.0.0.1:{health_port}"  # the probes' own listener

    async def status(path: str) -> int:
        try:
            async with httpx.AsyncClient(timeout=3) as http:
                return (await http.get(probes + path)).status_code
        except httpx.HTTPError:
            return 0

    async def answers(path: str, code: int) -> bool:
        assert proc.poll() is None, (tmp_path / "operator.log").read_text()[-3000:]
        return await status(path) == code

    async def seat_pod() -> bool:
        assert proc.poll() is None, (tmp_path / "operator.log").read_text()[-3000:]
        return bool(await cluster.pods("booted"))

    try:
        await eventually(lambda: answers(live["path"], 200), timeout=60, interval=0.2, what="liveness 200")
        await eventually(lambda: answers(ready["path"], 200), timeout=60, interval=0.2, what="readiness 200")
        # the other replicas find it at its Pod IP and API port (they forward writes of its swarms there)
        assert env["AGENTIHOOKS_API_ADVERTISE_URL"] == base
        directory = Endpoints(
            redis.Redis(port=redis_port, password=PASSWORD), env["AGENTIHOOKS_SWARM_KEY_PREFIX"]
        )

        async def advertised() -> bool:
            return await asyncio.to_thread(directory.lookup, pod["metadata"]["name"]) == base

        await eventually(advertised, timeout=60, interval=0.2, what="its advertised API address")
        directory.client.close()
        # it works as the chart's ServiceAccount: a Swarm of its namespace gets its seat's Pod
        await cluster.create_swarm("booted", swarm_spec())
        await eventually(seat_pod, timeout=60, interval=0.2, what="the seat's Pod")
        (seat,) = await cluster.pods("booted")
        assert seat["metadata"]["annotations"][OPERATOR_ANNOTATION] == pod["metadata"]["name"]
        redis_server.kill()
        await eventually(lambda: answers(ready["path"], 503), timeout=60, interval=0.2, what="readiness 503")
        assert await status(live["path"]) == 200, "liveness holds while Redis is down"
        redis_server.start()
        await eventually(lambda: answers(ready["path"], 200), timeout=60, interval=0.2, what="readiness back")
        log_text = (tmp_path / "operator.log").read_text()
        assert PASSWORD not in log_text and SECRETS["agentihooks-operator-token"] not in log_text
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(proc.wait, spec["terminationGracePeriodSeconds"])
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        log.close()
        redis_server.kill()
    assert proc.returncode is not None
    assert cluster.count("create", "pods", "swarm-") == 1, "the operator's identity created the seat's Pod"
