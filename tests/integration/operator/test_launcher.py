"""The Kubernetes launcher against the real API server, as the operator's identity: idempotent creates,
credential refresh, retire and the deferred cleanup of a retired attempt's Secret (and of the launch
ConfigMap an earlier release made)."""

from __future__ import annotations

import asyncio
import base64

import redis
from agentihooks_checkpoint.launch import LaunchRecord
from agentihooks_operator.k8s.building.pods import Owner
from agentihooks_operator.k8s.client import KubeClient
from agentihooks_operator.k8s.launcher import KubernetesLauncher
from agentihooks_operator.k8s.leftovers import Leftovers, RedisLeftovers
from agentihooks_operator.recovery import LaunchPlan
from agentihooks_operator.recovery.store.keys import SwarmKeys
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
    record = LaunchRecord.model_validate_json(base64.b64decode(secret["data"]["launch.json"]))
    assert record.authority.execution_id == EID  # the crashed launch's Secret got the record too
    launcher.close()
    kube.close()


async def test_a_launch_is_two_creates_and_the_pod_mounts_its_record_from_the_secret(
    cluster: Cluster,
) -> None:
    launcher, kube = _launcher(cluster)
    assert await asyncio.to_thread(launcher.launch, _plan()) == "created"
    assert cluster.count("create", "secrets", f"swarm-{EID}") == 1
    assert cluster.count("create", "pods", f"swarm-{EID}") == 1
    assert cluster.count("create", "configmaps") == 0
    [pod] = await cluster.pods("example")
    launch = next(v for v in pod["spec"]["volumes"] if v["name"] == "launch")
    assert launch["secret"]["secretName"] == f"swarm-{EID}-credential"
    assert await asyncio.to_thread(launcher.launched, EID) is True
    launcher.close()
    kube.close()


async def test_retire_deletes_the_pod_and_leaves_the_secret_to_the_cleanup(cluster: Cluster) -> None:
    launcher, kube = _launcher(cluster)
    await asyncio.to_thread(launcher.launch, _plan())
    await asyncio.to_thread(launcher.retire, EID)
    await asyncio.to_thread(launcher.retire, EID)
    assert await asyncio.to_thread(launcher.exists, EID) is False
    secret = f"secrets/swarm-{EID}-credential"
    assert await cluster.get(f"/api/v1/namespaces/{cluster.namespace}/{secret}") is not None
    assert await asyncio.to_thread(launcher.clean_leftovers) == [EID]
    assert await asyncio.to_thread(launcher.clean_leftovers) == []
    for path in (f"pods/swarm-{EID}", secret):
        assert await cluster.get(f"/api/v1/namespaces/{cluster.namespace}/{path}") is None
    assert cluster.count("delete", "secrets", f"swarm-{EID}") == 1
    assert cluster.count("delete", "configmaps") == 0  # none was made; the list found none
    assert cluster.count("list", "configmaps") == 1
    launcher.close()
    kube.close()


async def test_an_earlier_releases_launch_configmap_is_deleted_with_its_attempt(cluster: Cluster) -> None:
    """An attempt launched before the upgrade has its record in a ConfigMap: a retire after the
    upgrade deletes it with the Secret, once; the attempts launched since make and delete none."""
    old, new = EID, "exe-" + "d" * 32
    launcher, kube = _launcher(cluster)
    await asyncio.to_thread(launcher.launch, _plan())
    r = await cluster.http.post(
        f"/api/v1/namespaces/{cluster.namespace}/configmaps",
        json={
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"swarm-{old}-launch", "labels": {"swarm.agentihooks.io/swarm": "example"}},
            "data": {"launch.json": "{}"},
        },
    )
    r.raise_for_status()
    await asyncio.to_thread(launcher.launch, _plan().model_copy(update={"execution_id": new}))
    for eid in (old, new):
        await asyncio.to_thread(launcher.retire, eid)
    assert sorted(await asyncio.to_thread(launcher.clean_leftovers)) == sorted([old, new])
    path = f"/api/v1/namespaces/{cluster.namespace}/configmaps/swarm-{old}-launch"
    assert await cluster.get(path) is None
    assert cluster.count("delete", "configmaps", f"swarm-{old}") == 1
    assert cluster.count("delete", "configmaps", f"swarm-{new}") == 0
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
