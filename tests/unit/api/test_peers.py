"""Which Pod an advertised address must belong to (api/access/peers.py), without a cluster."""

from __future__ import annotations

from typing import Any

import pytest
from agentihooks_operator.api.access.peers import LoopbackPeers, PodPeers, peers_from_settings, pod_serves
from agentihooks_operator.k8s.config import OperatorConfig, parse_selector
from agentihooks_operator.k8s.errors import ApiError

LABELS = {"app": "op", "component": "operator"}


def pod(ip: str = "10.0.0.5", labels: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "op-1", "labels": LABELS if labels is None else labels, **meta},
        "spec": {"containers": [{"name": "operator", "ports": [
            {"name": "http", "containerPort": 8080}, {"name": "health", "containerPort": 8081},
        ]}]},
        "status": {"podIP": ip, "podIPs": [{"ip": ip}, {"ip": "fd00::5"}]},
    }  # fmt: skip


def test_only_the_pods_declared_control_api_port_is_contacted() -> None:
    kube = Kube(pod())
    peers = PodPeers(lambda: kube, "ops", LABELS)
    assert peers.allowed("op-1", "http://10.0.0.5:8080")
    assert not peers.allowed("op-1", "http://10.0.0.5:8081")  # the same Pod's health port
    assert not peers.allowed("op-1", "http://10.0.0.5:9999")  # a port it does not declare
    assert not peers.allowed("op-1", "http://10.0.0.5")  # port 80: not declared either
    assert not peers.allowed("op-1", "http://10.0.0.5:99999")  # no port at all
    assert pod_serves(pod(), "10.0.0.5", LABELS, 8080) and not pod_serves(pod(), "10.0.0.5", LABELS, 8081)


def test_a_pod_serves_only_its_own_ips_when_it_carries_every_label_and_is_not_going() -> None:
    assert pod_serves(pod(), "10.0.0.5", LABELS)
    assert pod_serves(pod(), "fd00:0::5", LABELS)  # compared as addresses, not strings
    assert not pod_serves(pod(), "10.0.0.6", LABELS)
    assert not pod_serves(pod(labels={"app": "op"}), "10.0.0.5", LABELS)
    assert not pod_serves(pod(deletionTimestamp="2026-01-01T00:00:00Z"), "10.0.0.5", LABELS)
    assert not pod_serves(None, "10.0.0.5", LABELS)
    assert not pod_serves({"metadata": {"labels": LABELS}, "status": {}}, "10.0.0.5", LABELS)


def test_outside_a_cluster_only_loopback_addresses_are_peers() -> None:
    peers = LoopbackPeers()
    assert peers.allowed("a", "http://127.0.0.1:8080") and peers.allowed("a", "http://[::1]:8080")
    assert not peers.allowed("a", "http://10.0.0.5:8080")
    assert not peers.allowed("a", "http://169.254.169.254:80")
    assert not peers.allowed("a", "http://localhost:8080")  # a name is no address
    assert isinstance(peers_from_settings(lambda: None, "", ""), LoopbackPeers)


class Kube:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.calls: list[tuple[str, str, str]] = []

    def get(self, resource: str, namespace: str, name: str) -> Any:
        self.calls.append((resource, namespace, name))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_the_holders_own_pod_is_read_by_name_and_a_yes_is_reused_for_its_ttl() -> None:
    kube, now = Kube(pod()), [0.0]
    peers = PodPeers(lambda: kube, "ops", LABELS, ttl=5.0, clock=lambda: now[0])
    assert peers.allowed("op-1", "http://10.0.0.5:8080")
    assert peers.allowed("op-1", "http://10.0.0.5:8080")
    assert kube.calls == [("pods", "ops", "op-1")]
    now[0] = 6.0
    kube.answer = None  # the Pod is gone
    assert not peers.allowed("op-1", "http://10.0.0.5:8080")
    assert not peers.allowed("op-1", "http://10.0.0.5:8080")  # a no is never reused: asked each time
    assert len(kube.calls) == 3


@pytest.mark.parametrize(
    "answer",
    [
        ApiError(403, "GET", "/api/v1/namespaces/ops/pods/op-1", "Forbidden"),
        OSError("down"),
        pod(ip="10.0.0.9"),
    ],
)
def test_when_the_api_server_cannot_say_yes_nobody_is_contacted(answer: Any) -> None:
    peers = PodPeers(lambda: Kube(answer), "ops", LABELS)
    assert not peers.allowed("op-1", "http://10.0.0.5:8080")
    assert not peers.allowed("", "http://10.0.0.5:8080")
    assert not peers.allowed("op-1", "http://op-1.local:8080")


def test_the_selector_setting_takes_key_value_pairs_and_names_what_it_cannot_read() -> None:
    assert parse_selector("a=b, c=d,") == {"a": "b", "c": "d"}
    assert parse_selector("") == {}
    for bad in ("a!=b", "a", "a==b", "=b"):
        with pytest.raises(ValueError, match="key=value"):
            parse_selector(bad)
    with pytest.raises(ValueError, match="not 'tier'"):
        OperatorConfig(operator_pod_selector="app=op,tier")
