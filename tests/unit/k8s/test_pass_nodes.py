"""Which Node list a pass trusts before a Pod bound to a Node may be observed lost.

Between full passes the Nodes are listed only every node period. A Node that came back Ready (a
kubelet restarted after an outage) gets the replacement bound to it by the scheduler within a
second; a pass that judged that Pod against the older list (the Node ``Unknown`` for longer than
``node_lost_after_s``) fenced the healthy replacement as ``node_lost`` on the real node. A Pod
bound to a Node that the list lacks or shows not Ready makes the pass list the Nodes again.
"""

from __future__ import annotations

from typing import Any

from agentihooks_operator.k8s.building.pods import Owner
from agentihooks_operator.k8s.observing.passreads import PassReads
from agentihooks_operator.recovery.identity import SwarmId
from agentihooks_operator.recovery.store.keys import SwarmKeys


def _node(name: str, ready: str) -> dict[str, Any]:
    cond = {"type": "Ready", "status": ready, "lastTransitionTime": "2026-12-02T10:00:00Z"}
    return {"metadata": {"name": name}, "status": {"conditions": [cond]}}


class _Kube:
    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        self.nodes = nodes
        self.lists = 0

    def list(self, resource: str, namespace: str | None, *_: Any) -> list[dict[str, Any]]:
        assert resource == "nodes"
        self.lists += 1
        return self.nodes


class _Reads(PassReads):
    def __init__(self, kube: _Kube) -> None:
        self.kube = kube  # type: ignore[assignment]
        self.owner = Owner(name="s", namespace="ns", uid=None, controller="op-a")
        self._init_reads(None, SwarmKeys.of("agentihooks", SwarmId("ns", "s")), 40.0, None)  # type: ignore[arg-type]


def _bound(node: str) -> dict[str, dict[str, Any]]:
    return {"swarm-exe-1": {"metadata": {"name": "swarm-exe-1"}, "spec": {"nodeName": node}}}


def test_a_pod_bound_to_a_node_last_seen_lost_lists_the_nodes_again() -> None:
    kube = _Kube([_node("n1", "True")])  # what the API server says now: back and Ready
    reads = _Reads(kube)
    stale = {"n1": _node("n1", "Unknown")}  # the last list, taken while the kubelet was down
    view = reads._nodes_of(_bound("n1"), stale)
    assert kube.lists == 1
    assert view is not None and view["n1"]["status"]["conditions"][0]["status"] == "True"


def test_a_pod_bound_to_a_node_the_list_lacks_lists_the_nodes_again() -> None:
    kube = _Kube([_node("n1", "True"), _node("n2", "True")])
    reads = _Reads(kube)
    view = reads._nodes_of(_bound("n2"), {"n1": _node("n1", "True")})
    assert kube.lists == 1 and view is not None and "n2" in view


def test_pods_on_ready_nodes_cost_no_list() -> None:
    kube = _Kube([])
    reads = _Reads(kube)
    nodes = {"n1": _node("n1", "True")}
    assert reads._nodes_of(_bound("n1"), nodes) is nodes
    assert reads._nodes_of({}, nodes) is nodes
    assert kube.lists == 0
