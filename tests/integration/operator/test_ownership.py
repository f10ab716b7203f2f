"""Ownership and identity on the real control plane.

* Every object of an attempt (its Pod and its Secret: credential and launch record)
  carries an ownerReference to the Swarm's real uid, as the controller. Deleting
  the Swarm waits for kopf's finalizer, which the operator releases once its
  recovery loop has stopped; then kube-controller-manager's garbage collector
  deletes every dependent. The operator itself deletes none of them (the audit
  log shows no delete from it after the Swarm's), creates nothing more, and
  gives the swarm's lease up, even when winding the loop down is slow (kopf
  cancels the daemon of a deleted Swarm right after signalling it; the release
  used to be skipped then, leaving the lease held until its TTL).

* The operator logs in from a kubeconfig that holds only a client certificate
  (no token): the API server authenticates it as the certificate's CN, a User
  bound to the chart's Role and ClusterRole and to nothing else. The operator
  recovers an OOM-killed seat, and the audit log shows that every request, kopf's
  and the operator's own client's, was made by that user and none was refused.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import redis
import yaml
from agentihooks_operator.recovery.store.keys import SwarmKeys
from testsupport import kubelet as kl
from testsupport.controlplane import write_kubeconfig
from testsupport.kube import eventually, running_operator
from testsupport.node import RealKubelet as Kubelet
from testsupport.realcluster import SWARMS, apply, collection
from testsupport.realcluster import RealCluster as Cluster

from .conftest import listed_calls, swarm_spec
from .flows import choose, eid, fence, fenced, replacement, running_seat

FINALIZER = "swarm.agentihooks.io/operator"
LABEL = "swarm.agentihooks.io/swarm"


async def _owned(cluster: Cluster, resource: str, swarm: str) -> list[dict[str, Any]]:
    """Every object of ``resource`` labelled with the swarm, Terminating ones included."""
    r = await cluster.http.get(
        f"/api/v1/namespaces/{cluster.namespace}/{resource}", params={"labelSelector": f"{LABEL}={swarm}"}
    )
    r.raise_for_status()
    return list(r.json()["items"])


async def _running(cluster: Cluster, count: int) -> bool:
    status = (await cluster.swarm("example")).get("status") or {}
    return status.get("running") == count and status.get("awaitingDecision") == 0


async def test_deleting_the_swarm_removes_its_pods_through_the_garbage_collector(
    cluster: Cluster, kubelet: Kubelet, redis_url: str
) -> None:
    client = redis.Redis.from_url(redis_url)
    keys = SwarmKeys("agentihooks", "example", cluster.namespace)
    # A lease far longer than the test: only a release, not its expiry, frees it below. Pod events
    # start the passes; the long interval keeps the loop waiting between them, where kopf's cancel
    # of the deleted Swarm's daemon lands on its wind-down.
    async with running_operator(cluster, redis_url, operator_id="op-a", lease_ms=120_000) as memo:
        created = await cluster.create_swarm("example", swarm_spec(seats=2, interval=5))
        uid = created["metadata"]["uid"]
        first = await running_seat(cluster, kubelet, "example")
        await eventually(lambda: _count_pods(cluster, 2), what="both seats' Pods")
        # One seat goes through a recovery, so a replacement's objects are owned as well.
        lost = eid(first)
        await kubelet.set_status(first["metadata"]["name"], kl.oom_killed())
        await fenced(redis_url, "example", lost)
        assert choose(redis_url, "example", lost, "fresh")
        second = await replacement(cluster, "example", 2)
        await running_seat(cluster, kubelet, "example", generation=2)
        other = next(
            p for p in await cluster.pods("example") if p["metadata"]["name"] != second["metadata"]["name"]
        )
        await kubelet.set_status(other["metadata"]["name"], kl.running(), node_name="kind-worker")
        await eventually(lambda: _running(cluster, 2), what="both seats running")
        await eventually(
            lambda: _leftovers_cleaned(cluster, lost),
            what="the fenced attempt's Secret deleted",
        )

        swarm = await cluster.swarm("example")
        assert FINALIZER in swarm["metadata"].get("finalizers", []), "kopf's finalizer holds the Swarm"
        owned: dict[str, list[dict[str, Any]]] = {}
        assert await _owned(cluster, "configmaps", "example") == []  # a launch makes none any more
        for resource in ("pods", "secrets"):
            owned[resource] = await _owned(cluster, resource, "example")
            assert len(owned[resource]) == 2, (resource, [o["metadata"]["name"] for o in owned[resource]])
            for obj in owned[resource]:
                assert obj["metadata"]["ownerReferences"] == [
                    {
                        "apiVersion": "agentihooks.io/v1alpha1",
                        "kind": "Swarm",
                        "name": "example",
                        "uid": uid,
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ], obj["metadata"]["name"]
        deletes_before = {r: cluster.count("delete", r) for r in owned}
        creates_before = {r: cluster.count("create", r) for r in owned}

        # Winding the swarm's pass down takes a while (Events still being posted, a loaded node): kopf
        # cancels a deleted Swarm's daemon meanwhile, and the lease must be given up all the same.
        runner = memo["passes"][(cluster.namespace, "example")]
        close = runner.close

        def close_slowly(*args: Any, **kwargs: Any) -> None:  # SwarmPass.close's signature
            time.sleep(2)
            close(*args, **kwargs)

        runner.close = close_slowly
        r = await cluster.http.delete(SWARMS.format(ns=cluster.namespace) + "/example")
        assert r.status_code in (200, 202), r.text
        await eventually(
            lambda: _gone(cluster, SWARMS.format(ns=cluster.namespace) + "/example"),
            timeout=60,
            what="the Swarm deleted once the operator released its finalizer",
        )
        for resource in owned:
            await eventually(
                lambda res=resource: _none_owned(cluster, res),
                timeout=90,
                what=f"the garbage collector deleting the Swarm's {resource}",
            )
        await eventually(
            lambda: client.get(keys.control_owner) is None, what="the operator giving the swarm's lease up"
        )

    # The operator released the finalizer (a patch of the Swarm by its identity) and deleted nothing
    # and created nothing after the Swarm's deletion: the dependents went with the garbage collector.
    assert cluster.count("patch", "swarms", "example") >= 2  # the finalizer added, then removed
    assert {r: cluster.count("delete", r) for r in owned} == deletes_before
    assert {r: cluster.count("create", r) for r in owned} == creates_before
    record = fence(redis_url, "example", lost)
    assert record is not None and record.released == ["grant", "account"]
    client.close()


async def _count_pods(cluster: Cluster, n: int) -> bool:
    return len(await cluster.pods("example")) == n


async def _gone(cluster: Cluster, path: str) -> bool:
    return (await cluster.http.get(path)).status_code == 404


async def _none_owned(cluster: Cluster, resource: str) -> bool:
    return await _owned(cluster, resource, "example") == []


async def _leftovers_cleaned(cluster: Cluster, execution_id: str) -> bool:
    ns = cluster.namespace
    return await _gone(cluster, f"/api/v1/namespaces/{ns}/secrets/swarm-{execution_id}-credential")


# -- a kubeconfig that holds only a client certificate -------------------------------------------
def _bind_user(cluster: Cluster, user: str) -> list[dict[str, Any]]:
    """Bind the chart's Role (in the test's namespace) and ClusterRole to the User ``user``."""
    role = next(d for d in cluster.rbac if d["kind"] == "Role")
    cluster_role = next(d for d in cluster.rbac if d["kind"] == "ClusterRole")
    subject = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]
    suffix = uuid.uuid4().hex[:6]
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": f"cert-user-{suffix}", "namespace": cluster.namespace},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": role["metadata"]["name"],
            },
            "subjects": subject,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"cert-user-{cluster.namespace}-{suffix}"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": cluster_role["metadata"]["name"],
            },
            "subjects": subject,
        },
    ]
    with cluster.plane.client() as http:
        for doc in docs:
            apply(http, doc, cluster.namespace)
    return docs


def _calls_of(cluster: Cluster, user: str) -> list[dict[str, Any]]:
    return [
        e
        for e in cluster.plane.audit_events()
        if (e.get("user") or {}).get("username") == user and e.get("objectRef")
    ]


def _call(event: dict[str, Any]) -> tuple[str, str, str]:
    ref = event["objectRef"]
    resource = ref.get("resource", "") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
    return str(event["verb"]), str(ref.get("apiGroup") or ""), resource


async def test_operator_logged_in_with_only_a_client_certificate_recovers_a_seat(
    cluster: Cluster, kubelet: Kubelet, redis_url: str, tmp_path: Path
) -> None:
    user = f"agentihooks-operator-cert-{uuid.uuid4().hex[:6]}"
    pair = cluster.plane.ca.issue(f"op-cert-{cluster.namespace}", user)
    config = write_kubeconfig(tmp_path / "cert.kubeconfig", cluster.url, cluster.plane.ca.cert, client=pair)
    [entry] = yaml.safe_load(config.read_text())["users"]
    assert set(entry["user"]) == {"client-certificate", "client-key"}, (
        "the kubeconfig holds only a certificate"
    )
    bindings = _bind_user(cluster, user)
    as_cert = SimpleNamespace(kubeconfig=config, namespace=cluster.namespace)
    sa_calls_before = len(cluster.calls_by(""))
    try:
        async with running_operator(as_cert, redis_url, operator_id="op-cert"):  # type: ignore[arg-type]
            await cluster.create_swarm("example", swarm_spec(interval=0.3))
            first = await running_seat(cluster, kubelet, "example")
            lost = eid(first)
            await kubelet.set_status(first["metadata"]["name"], kl.oom_killed())
            record = await fenced(redis_url, "example", lost)
            assert record.reason == "oom_killed"
            assert choose(redis_url, "example", lost, "fresh")
            second = await replacement(cluster, "example", 2)
            await running_seat(cluster, kubelet, "example", generation=2)
            await eventually(lambda: _running(cluster, 1), what="the replacement running")
    finally:
        for doc in bindings:
            await cluster.http.delete(f"{collection(doc, cluster.namespace)}/{doc['metadata']['name']}")

    assert [p["metadata"]["name"] for p in await cluster.pods("example")] == [second["metadata"]["name"]]
    events = _calls_of(cluster, user)
    # Every request came from the certificate's user: kopf's (watches, finalizer patches) and the
    # operator's own client's (Pods, launch records, status), and the API server refused none.
    agents = {str(e.get("userAgent") or "").split("/")[0] for e in events}
    assert {"kopf", "agentihooks-operator"} <= agents, agents
    calls = [_call(e) for e in events]
    assert calls.count(("create", "", "pods")) == 2
    assert ("patch", "agentihooks.io", "swarms/status") in calls
    assert ("watch", "", "pods") in calls and ("watch", "agentihooks.io", "swarms") in calls
    assert not [e for e in events if (e.get("responseStatus") or {}).get("code") == 403]
    assert set(calls) <= listed_calls(), sorted(set(calls) - listed_calls())
    # ...and none from the ServiceAccount whose token the other tests use.
    assert len(cluster.calls_by("")) == sa_calls_before == 0
