"""The page with the real operator: a Pod that the kubelet reports OOMKilled reaches the page.

The kopf operator runs against the real control plane (its own namespace with
Pod Security ``restricted``, the chart's RBAC as its only rights) and the real
Redis; the simulated kubelet binds the Pod to its Node and moves it to Running
and then to OOMKilled through the status subresource. The control API (with
the ledger page) serves the operator's own ``Recovery`` for the swarm, as the
operator process does, so the decision posted from the page is applied under
the operator's lease and its launcher creates the replacement Pod. The worker
heartbeats and the outcome go through the API's worker routes with the
credentials the operator put into the Pods' Secrets.
"""

from __future__ import annotations

import base64
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Any

import httpx
import pytest
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores.local import LocalStore
from agentihooks_operator.api import ApiState, SwarmRegistry
from agentihooks_operator.api.access.auth import sha256_hex
from agentihooks_operator.k8s.building.pods import CREDENTIAL_KEY, credential_secret_name
from agentihooks_operator.swarm import SwarmSpec
from testsupport import kubelet as kl
from testsupport.checkpoints import build_checkpoint
from testsupport.control_api import live_api
from testsupport.kube import eventually, running_operator
from testsupport.node import RealKubelet
from testsupport.realcluster import RealCluster as Cluster

from .conftest import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="/usr/bin/chromium is absent: install Debian's chromium package to run the browser tests",
)

SWARM = "example"
TAG = "2.1.0"
SPEC: dict[str, Any] = {
    "image": f"ghcr.io/agentihooks/worker:{TAG}",
    "harness": {"name": "claude", "command": ["claude", "-p", "work"]},
    "seats": [
        {"name": "eng-1", "project": "github.com/acme/app", "task": {"id": "t-1", "text": "Port the parser"}}
    ],
    "recovery": {"automation": False, "passIntervalSeconds": 0.5},
}


def _gen(pod: dict[str, Any]) -> int:
    return int(pod["metadata"]["labels"]["swarm.agentihooks.io/generation"])


def _eid(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["labels"]["swarm.agentihooks.io/execution-id"])


async def _pod(cluster: Cluster, generation: int) -> dict[str, Any]:
    async def find() -> dict[str, Any] | None:
        return next((p for p in await cluster.pods(SWARM) if _gen(p) == generation), None)

    return dict(await eventually(find, what=f"generation {generation} Pod"))


async def _worker_token(cluster: Cluster, execution_id: str) -> str:
    """The worker credential the operator put into the Pod's Secret (the API server keeps it in ``data``)."""
    name = credential_secret_name(execution_id)
    secret = await cluster.get(f"/api/v1/namespaces/{cluster.namespace}/secrets/{name}")
    assert secret is not None
    return base64.b64decode(secret["data"][CREDENTIAL_KEY]).decode()


async def test_oom_killed_pod_through_the_operator_to_the_page_and_back(
    tmp_path: Path, redis_url: str, real_cluster: Cluster, real_kubelet: RealKubelet
) -> None:
    from playwright.async_api import async_playwright, expect

    root = tmp_path / "store"
    root.mkdir()
    store = LocalStore(root)
    operator_token = "op-" + secrets.token_urlsafe(24)
    registry = SwarmRegistry()
    import redis

    client = redis.Redis.from_url(redis_url)
    state = ApiState(registry=registry, redis=client, operator_hash=sha256_hex(operator_token), catalog=store)
    cluster, kubelet = real_cluster, real_kubelet
    profile = tempfile.mkdtemp(prefix="ledger-chromium-")
    try:
        async with (
            running_operator(cluster, redis_url, catalog=store) as memo,
            async_playwright() as pw,
        ):
            with live_api(state) as server:
                api = httpx.AsyncClient(base_url=server.url, timeout=30)
                await cluster.create_swarm(SWARM, SPEC)
                first = await _pod(cluster, 1)
                await kubelet.set_status(first["metadata"]["name"], kl.running(), node_name="kind-worker")
                runner = await eventually(
                    lambda: memo["passes"].get((cluster.namespace, SWARM)), what="recovery loop"
                )
                registry.publish(
                    SWARM,
                    runner.recovery,
                    SwarmSpec.model_validate(SPEC),
                    holder="op-a",
                    namespace=cluster.namespace,
                )

                lost = _eid(first)
                token = await _worker_token(cluster, lost)
                auth = {"Authorization": f"Bearer {token}"}
                r = await api.post(
                    f"/v1/executions/{lost}/session", json={"session_id": "sess-1"}, headers=auth
                )
                assert r.status_code == 200, r.text
                built = build_checkpoint(
                    store,
                    StoreScope(swarm=SWARM, task_id="t-1", task_generation=1, namespace=cluster.namespace),
                    tmp_path / "ckpt",
                    checkpoint_id="ckpt-7",
                    sequence=7,
                    execution_id=lost,
                    compatibility_key=TAG,
                    session_id="sess-1",
                )

                context = await pw.chromium.launch_persistent_context(
                    profile, executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
                )
                page = await context.new_page()
                await page.goto(f"{server.url}/ledger/{cluster.namespace}/{SWARM}")
                await page.get_by_label("Access token").fill(operator_token)
                await page.get_by_role("button", name="Sign in").click()
                rows = page.locator("#ledger-rows tr")
                await expect(rows.locator("td.task-text")).to_have_text("Port the parser")
                await expect(page.locator("article.card")).to_have_count(0)

                await kubelet.set_status(first["metadata"]["name"], kl.oom_killed())
                card = page.locator('article.card[data-seat="eng-1"]')
                await expect(card).to_have_attribute("data-state", "awaiting", timeout=15_000)
                await expect(card.locator("dd.reason")).to_have_text(
                    f"oom_killed; native resume from ckpt-7 at record {built.watermark}"
                )
                await expect(rows.locator(".badge")).to_have_text("RECOVERY PENDING")
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                await page.screenshot(path=str(ARTIFACTS / "10-operator-oom-awaiting.png"), full_page=True)

                await card.get_by_role("button", name="Resume native for seat eng-1").click()
                await expect(card).to_have_attribute("data-state", "pending")
                second = await _pod(cluster, 2)
                new = _eid(second)
                await expect(card.locator("dd.successor")).to_have_text(new)
                assert len([p for p in await cluster.pods(SWARM) if _gen(p) == 2]) == 1
                # the OOM-killed Pod was deleted by the operator and its deletion finished by the kubelet
                await eventually(lambda: _gone(cluster, lost), what="the fenced Pod removed")
                await kubelet.set_status(second["metadata"]["name"], kl.running(), node_name="kind-worker")

                token = await _worker_token(cluster, new)
                outcome = {
                    "execution_id": new,
                    "recovery": "native",
                    "checkpoint_id": "ckpt-7",
                    "session_id": "sess-1",
                    "watermark": built.watermark,
                }
                r = await api.post(
                    f"/v1/executions/{new}/outcome",
                    json=outcome,
                    headers={"Authorization": f"Bearer {token}"},
                )
                assert r.status_code == 200, r.text
                await expect(card).to_have_attribute("data-state", "recovered", timeout=10_000)
                await expect(card.locator("dd.continuity")).to_have_text(
                    f"native from ckpt-7 at record {built.watermark} (verified)"
                )
                await expect(rows.locator(".badge")).to_have_count(0)
                await page.screenshot(path=str(ARTIFACTS / "11-operator-recovered.png"), full_page=True)
                await context.close()
                await api.aclose()
    finally:
        client.close()
        shutil.rmtree(profile, ignore_errors=True)
    # exactly one replacement: the operator's identity created two Pods in all, one per generation
    assert cluster.count("create", "pods") == 2
    assert [_gen(p) for p in await cluster.pods(SWARM)] == [2]


async def _gone(cluster: Cluster, execution_id: str) -> bool:
    return await cluster.get(f"/api/v1/namespaces/{cluster.namespace}/pods/swarm-{execution_id}") is None
