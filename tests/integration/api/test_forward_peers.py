"""A replica forwards only to an address the API server lists as the holder's own operator Pod's IP
(issue 23): an address in Redis alone is never contacted.

The holder ``ctl-a`` advertises a stand-in server on ``127.0.0.9`` that records every request. The
forwarding replica ``ctl-b`` checks peers as the chart sets it up: Pods read with the chart's RBAC
from the real control plane, in the operator's namespace, with the operator's labels. Until a Pod
named ``ctl-a``, labelled as an operator Pod and listing that IP, exists, the caller is answered
``503 not_leader`` and the stand-in sees no connection; then the request goes there once, carrying
no caller credential.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest
from agentihooks_operator.api.access.peers import PodPeers
from testsupport.control_api import World

from .test_forward_to_holder import (
    RELAUNCH,
    advertise,
    assert_not_leader,
    capturing_holder,
    refused_replacement,
    second_replica,
)

LABELS = {"app.kubernetes.io/name": "agentihooks-recovery", "app.kubernetes.io/component": "operator"}
HOST = "127.0.0.9"


async def put_pod(
    cluster: Any, name: str, labels: dict[str, str], ip: str | None, port: int | None = None
) -> None:
    """(Re)create Pod ``name`` with ``labels`` and, as its kubelet would report it, ``ip``; ``port``:
    its control API port (a container port named ``http``, as the chart declares it)."""
    pods = f"/api/v1/namespaces/{cluster.namespace}/pods"
    await cluster.http.delete(f"{pods}/{name}", params={"gracePeriodSeconds": "0"})
    for _ in range(100):
        if (await cluster.http.get(f"{pods}/{name}")).status_code == 404:
            break
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "automountServiceAccountToken": False,
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "operator",
                    "image": "agentihooks/operator:test",
                    **({"ports": [{"name": "http", "containerPort": port}]} if port else {}),
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
        },
    }
    made = await cluster.http.post(pods, json=body)
    assert made.status_code == 201, made.text
    if ip is not None:
        status = {"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}}
        patched = await cluster.http.patch(
            f"{pods}/{name}/status",
            json=status,
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert patched.status_code == 200, patched.text


@pytest.mark.parametrize(
    "pod",
    ["none", "another ip", "not an operator pod", "another replica's ip", "another port"],
)
async def test_an_address_no_operator_pod_of_the_holder_has_is_never_contacted(
    world: World, redis_url: str, real_cluster: Any, pod: str
) -> None:
    refused_replacement(world)
    if pod == "another ip":
        await put_pod(real_cluster, "ctl-a", LABELS, "127.0.0.10")
    elif pod == "not an operator pod":
        await put_pod(real_cluster, "ctl-a", {"app.kubernetes.io/name": "agentihooks-recovery"}, HOST)
    elif pod == "another replica's ip":  # the address is an operator Pod's, but not the holder's
        await put_pod(real_cluster, "ctl-c", LABELS, HOST)
        await put_pod(real_cluster, "ctl-a", LABELS, "127.0.0.10")
    kube = real_cluster.operator_client()
    peers = PodPeers(lambda: kube, real_cluster.namespace, LABELS)
    with capturing_holder(HOST) as (url, seen), second_replica(world, redis_url, peers=peers) as b:
        if pod == "another port":  # the holder's own Pod and IP, but not its control API's port
            await put_pod(real_cluster, "ctl-a", LABELS, HOST, port=urlsplit(url).port + 1)
        advertise(world, url)
        assert_not_leader(b.call("POST", RELAUNCH, world.tokens["operator"], {}))
        assert seen == []


async def test_the_holders_own_pod_address_is_contacted_without_the_callers_credential(
    world: World, redis_url: str, real_cluster: Any
) -> None:
    refused_replacement(world)
    kube = real_cluster.operator_client()
    peers = PodPeers(lambda: kube, real_cluster.namespace, LABELS)
    operator = world.tokens["operator"]
    with capturing_holder(HOST) as (url, seen), second_replica(world, redis_url, peers=peers) as b:
        advertise(world, url)
        assert_not_leader(b.call("POST", RELAUNCH, operator, {}))  # no Pod yet
        await put_pod(real_cluster, "ctl-a", LABELS, HOST, port=urlsplit(url).port)
        answer = b.call("POST", RELAUNCH, operator, {})
        assert answer.status_code == 418, answer.text  # the stand-in's answer, passed back
        assert len(seen) == 1
        assert b"authorization" not in seen[0].lower() and operator.encode() not in seen[0]
    # The Pod goes (that replica is gone): once the checker's yes is older than its ttl, the address
    # is asked about again, and refused.
    now = [0.0]
    clocked = PodPeers(lambda: kube, real_cluster.namespace, LABELS, ttl=10.0, clock=lambda: now[0])
    assert clocked.allowed("ctl-a", url)
    await real_cluster.http.delete(
        f"/api/v1/namespaces/{real_cluster.namespace}/pods/ctl-a", params={"gracePeriodSeconds": "0"}
    )
    assert clocked.allowed("ctl-a", url)  # still within the ttl of the last yes
    now[0] = 11.0
    assert not clocked.allowed("ctl-a", url)
