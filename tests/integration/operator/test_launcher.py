"""The Kubernetes launcher against the real API server, as the operator's identity: idempotent creates,
credential refresh, retire and the deferred cleanup of a retired attempt's Secret and ConfigMap."""

from __future__ import annotations

import asyncio
import base64

import redis
from agentihooks_operator.k8s.client import KubeClient
from agentihooks_operator.k8s.launcher import KubernetesLauncher
from agentihooks_operator.k8s.leftovers import Leftovers, RedisLeftovers
from agentihooks_operator.k8s.pods import Owner
from agentihooks_operator.recovery import LaunchPlan
from agentihooks_operator.recovery.keys import SwarmKeys
from agentihooks_operator.swarm import SwarmSpec
from pydantic import SecretStr
from testsupport.realcluster import RealCluster as Cluster

from .conftest import swarm_spec

EID = "exe-" + "c" * 32


def _plan(token: str = "tok-new") -> LaunchPlan:
    return LaunchPlan(
        execution_id=EID,
        seat="eng-1",
        generation=2,
        task_id="t-1",
        task_generation=1,
        task_text="task 1",
        grant_id="grant-2",
        worker_token=SecretStr(token),
        compatibility_key="2.1.0",
        epoch=3,
    )


def _launcher(cluster: Cluster, leftovers: Leftovers | None = None) -> tuple[KubernetesLauncher, KubeClient]:
    kube: KubeClient = cluster.operator_client()
    spec = SwarmSpec.model_validate(swarm_spec())
    owner = Owner(name="example", namespace=cluster.namespace, uid=None, controller="op-a")
    return KubernetesLauncher(kube, owner, lambda: spec, leftovers=leftovers), kube


def _token(secret: dict) -> str:
    if "data" in secret and secret["data"].get("token"):
        return base64.b64decode(secret["data"]["token"]).decode()
    return str(secret["stringData"]["token"])


async def test_repeated_launch_is_observed_not_duplicated(cluster: Cluster) -> None:
    launcher, kube = _launcher(cluster)
    assert await asyncio.to_thread(launcher.exists, EID) is False
    assert await asyncio.to_thread(launcher.launch, _plan()) == "created"
    assert await asyncio.to_thread(launcher.launch, _plan()) == "exists"
    assert await asyncio.to_thread(launcher.exists, EID) is True
    assert len(await cluster.pods("example")) == 1
    pod = (await cluster.pods("example"))[0]
    assert pod["metadata"]["annotations"]["swarm.agentihooks.io/controller-epoch"] == "3"
    launcher.close()
    kube.close()


async def test_a_secret_left_by_a_crashed_launch_gets_the_new_credential(cluster: Cluster) -> None:
    launcher, kube = _launcher(cluster)
    r = await cluster.http.post(
        f"/api/v1/namespaces/{cluster.namespace}/secrets",
        json={
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": f"swarm-{EID}-credential", "namespace": cluster.namespace},
            "stringData": {"token": "tok-old"},
        },
    )
    r.raise_for_status()
    assert await asyncio.to_thread(launcher.launch, _plan("tok-new")) == "created"
    secret = await cluster.get(f"/api/v1/namespaces/{cluster.namespace}/secrets/swarm-{EID}-credential")
    assert secret is not None and _token(secret) == "tok-new"
    launcher.close()
    kube.close()


async def test_retire_deletes_the_pod_and_leaves_secret_and_configmap_to_the_cleanup(
    cluster: Cluster,
) -> None:
    launcher, kube = _launcher(cluster)
    await asyncio.to_thread(launcher.launch, _plan())
    await asyncio.to_thread(launcher.retire, EID)
    await asyncio.to_thread(launcher.retire, EID)
    assert await asyncio.to_thread(launcher.exists, EID) is False
    left = (f"secrets/swarm-{EID}-credential", f"configmaps/swarm-{EID}-launch")
    for path in left:
        assert await cluster.get(f"/api/v1/namespaces/{cluster.namespace}/{path}") is not None
    assert await asyncio.to_thread(launcher.clean_leftovers) == [EID]
    assert await asyncio.to_thread(launcher.clean_leftovers) == []
    for path in (f"pods/swarm-{EID}", *left):
        assert await cluster.get(f"/api/v1/namespaces/{cluster.namespace}/{path}") is None
    assert cluster.count("delete", "secrets", f"swarm-{EID}") == 1
    assert cluster.count("delete", "configmaps", f"swarm-{EID}") == 1
    launcher.close()
    kube.close()


async def test_leftovers_already_gone_are_cleaned_without_error(cluster: Cluster, redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    ledger = RedisLeftovers(client, SwarmKeys("agentihooks", "example"))
    launcher, kube = _launcher(cluster, leftovers=ledger)
    await asyncio.to_thread(launcher.retire, EID)  # never launched: nothing to delete but the note
    assert ledger.pending() == [EID]
    assert await asyncio.to_thread(launcher.clean_leftovers) == [EID]
    assert ledger.pending() == []
    launcher.close()
    kube.close()
    client.close()
