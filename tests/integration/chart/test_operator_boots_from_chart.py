"""The operator starts from the chart's own command, arguments and environment, and its probes mean
what the chart says they mean.

The Deployment is rendered, its container environment is built as the kubelet would (Secret values
filled in, ``$(VAR)`` references expanded, the Pod name from the downward API), and the real
``agentihooks-operator`` process is started with it against an emulated Kubernetes API (kmock, as in
the operator's own tests) and a password-protected Redis started from the chart's Redis command.
Then the kubelet's view: ``/healthz`` (liveness) answers, ``/readyz`` (readiness) answers; with Redis
gone readiness fails while liveness holds (a Redis outage must not restart the operator), and
readiness comes back with Redis.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from testsupport.chart_redis import ChartRedis, path_with_redis, rendered_command
from testsupport.helm import Helm, one
from testsupport.kube import Cluster, emulated_cluster, eventually
from testsupport.redis_server import free_port

# Not URL-safe on purpose: the operator receives the password apart from its Redis URL.
PASSWORD = "p@ss:w/rd#0123?&%20=+ 456789abcdef"
SECRETS = {"agentihooks-redis": PASSWORD, "agentihooks-operator-token": "operator-token-for-tests"}

pytestmark = pytest.mark.slow


def kubelet_env(container: dict[str, Any], pod_name: str) -> dict[str, str]:
    """The container environment as the kubelet builds it."""
    env: dict[str, str] = {}
    for var in container["env"]:
        source = var.get("valueFrom", {})
        if "value" in var:
            env[var["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), var["value"])
        elif "secretKeyRef" in source:
            env[var["name"]] = SECRETS[source["secretKeyRef"]["name"]]
        elif source.get("fieldRef", {}).get("fieldPath") == "metadata.name":
            env[var["name"]] = pod_name
        else:
            raise AssertionError(f"unexpected env source: {var}")
    return env


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with emulated_cluster(tmp_path) as c:
        yield c


async def test_operator_runs_from_the_rendered_deployment(
    helm: Helm, tmp_path: Path, cluster: Cluster
) -> None:
    redis_port, control_port = free_port(), free_port()
    redis_argv = rendered_command(
        helm, {"redis": {"auth": {"existingSecret": "agentihooks-redis"}}}, redis_port, tmp_path
    )
    redis_server = ChartRedis(
        redis_argv, {**path_with_redis(tmp_path / "bin"), "REDIS_PASSWORD": PASSWORD}, redis_port, PASSWORD
    )
    redis_server.start()
    values = {
        "operator": {"port": control_port, "operatorToken": {"existingSecret": "agentihooks-operator-token"}},
        "rbac": {"watchNamespaces": ["default"]},
        "redis": {
            "mode": "external",
            "external": {"url": f"redis://127.0.0.1:{redis_port}/0"},
            "auth": {"existingSecret": "agentihooks-redis"},
        },
    }
    pod = one(helm.render(values), "Deployment")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    env = kubelet_env(container, "rel-agentihooks-recovery-7d9f-abcde")
    assert env["AGENTIHOOKS_REDIS_PASSWORD"] == PASSWORD
    assert PASSWORD not in env["AGENTIHOOKS_REDIS_URL"], "the password travels apart from the URL"
    argv = [shutil.which(container["command"][0]) or container["command"][0], *container.get("args", [])]
    log = (tmp_path / "operator.log").open("wb")
    proc = subprocess.Popen(
        argv,
        env={
            **env,
            "PATH": os.environ["PATH"],
            "HOME": str(tmp_path),
            "KUBECONFIG": str(cluster.kubeconfig),
            "AGENTIHOOKS_CONTROL_HOST": "127.0.0.1",
        },
        stdout=log,
        stderr=log,
        cwd=tmp_path,
    )
    live, ready = (container[p]["httpGet"] for p in ("livenessProbe", "readinessProbe"))
    assert live["port"] == ready["port"] == "http" and container["ports"][0]["containerPort"] == control_port
    base = f"http://127.0.0.1:{control_port}"

    async def status(path: str) -> int:
        try:
            async with httpx.AsyncClient(timeout=3) as http:
                return (await http.get(base + path)).status_code
        except httpx.HTTPError:
            return 0

    async def answers(path: str, code: int) -> bool:
        assert proc.poll() is None, (tmp_path / "operator.log").read_text()[-3000:]
        return await status(path) == code

    try:
        await eventually(lambda: answers(live["path"], 200), timeout=60, interval=0.2, what="liveness 200")
        await eventually(lambda: answers(ready["path"], 200), timeout=60, interval=0.2, what="readiness 200")
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
                await asyncio.to_thread(proc.wait, pod["terminationGracePeriodSeconds"])
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        log.close()
        redis_server.kill()
    assert proc.returncode is not None
