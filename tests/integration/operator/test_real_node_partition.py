"""One live agent per seat across a real network partition on the real node (issue 44).

A seat's worker runs in the project's worker image on the real node, with the real Claude Code
holding an endless conversation (every reply asks for one more read-only tool call) with a model API
on the node address, which records the attempt behind each request (``X-Agentihooks-Execution``).
The worker holds a 30 s lease, renewed through the operator's control API.

The node is then cut off, not stopped: iptables drops every packet of the kubelet's connections to
the API server, and the Pods' packets to the control API. The container keeps running and keeps
calling its model. The node goes ``Unknown``, the operator fences the attempt ``node_lost`` at once
and records when its lease has run out; the master's ``fresh`` is accepted, but the replacement's Pod
is created only after that time. Before it, the cut-off worker stops its agent by itself (exit 76):
its container has ended before the partition heals, and its last model request came before the
time the replacement could start. After the heal: the fenced Pod is removed, nothing is fenced or
created twice, and the replacement runs and calls the model; no request of the old attempt came after
the replacement's first.
"""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from testsupport.images import project_images
from testsupport.kube import eventually, operator_process
from testsupport.model_api import ModelApi, Reply, ToolCall, overlaps
from testsupport.nodediag import diagnose
from testsupport.realcluster import RealCluster as Cluster
from testsupport.realnode import NODE_IP, POD_TEMPLATE
from testsupport.redis_server import free_port

from .conftest import swarm_spec
from .flows import choose, eid, fence, fenced, gen
from .test_real_worker_image import _account, _found

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
#: A guard against a hang on the real node, never a bound on speed.
HANG = 300.0
#: Longer than the node takes to be found lost here (the control plane's 4 s grace, the operator's
#: 3 s), so the fence comes while the cut-off worker may still run and the replacement must wait.
LEASE_S = 30
TOOL = ToolCall("Read", {"file_path": "/etc/hostname"})


@pytest.fixture(scope="module")
def worker_ref(real_node: Any) -> str:
    ref, tarball = project_images()["worker"]
    real_node.import_image(tarball)
    return ref


def _spec(worker_ref: str) -> dict[str, Any]:
    spec = swarm_spec()
    spec["image"] = worker_ref
    spec["harness"]["command"] = ["claude", "-p", "keep reading the hostname"]
    spec["harness"]["credentials"] = {"secretName": "partition-account"}
    spec["seats"][0]["project"] = "unknown"  # nothing to clone, nothing to capture: the agent alone
    spec["recovery"] = {**spec.get("recovery", {}), "workerLeaseSeconds": LEASE_S}
    env = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    spec["podTemplate"] = {
        "spec": {
            **POD_TEMPLATE,
            "terminationGracePeriodSeconds": 3,
            "container": {
                "imagePullPolicy": "Never",
                "env": [{"name": k, "value": v} for k, v in env.items()],
                "resources": {"requests": {"cpu": "10m", "memory": "1Gi"}, "limits": {"memory": "1Gi"}},
            },
        }
    }
    return spec


def _created_ms(pod: dict[str, Any]) -> float:
    stamp = pod["metadata"]["creationTimestamp"].replace("Z", "+00:00")
    return datetime.fromisoformat(stamp).timestamp() * 1000


async def test_a_partitioned_worker_stops_its_agent_before_its_replacement_starts(
    cluster: Cluster, real_node: Any, kubelet: Any, worker_ref: str, redis_url: str, tmp_path: Path
) -> None:
    other = "agentihooks-api-node"  # keeps the node lifecycle controller out of disruption mode
    await kubelet.put_node(other)
    port = free_port()
    env = {
        "AGENTIHOOKS_CONTROL_PORT": str(port),
        "AGENTIHOOKS_CONTROL_URL": f"http://{NODE_IP}:{port}",
        "AGENTIHOOKS_NODE_LOST_AFTER_SECONDS": "3",
    }
    script = [Reply(f"step {n}", TOOL) for n in range(2000)]
    partitioned = False
    try:
        with ModelApi(script, host=NODE_IP) as api:
            await _account(cluster, "partition-account", api)
            async with operator_process(
                cluster, redis_url, tmp_path, operator_id="op-partition", extra_env=env
            ):
                await cluster.create_swarm("cut", _spec(worker_ref))

                async def first_pod() -> dict[str, Any] | None:
                    return next((p for p in await cluster.pods("cut") if gen(p) == 1), None)

                first = await eventually(first_pod, timeout=90, what="the first attempt's Pod")
                lost = eid(first)

                def talking(n: int) -> bool:
                    return sum(1 for q in api.snapshot() if q.attempt == lost) >= n

                await eventually(lambda: _found(talking(3) or None), timeout=HANG, what="the agent calling")
                real_node.partition(port)
                partitioned = True
                cut_at = time.time() * 1000
                try:
                    record = await fenced(redis_url, "cut", lost, timeout=HANG)
                except AssertionError as e:
                    raise AssertionError(diagnose(real_node, await cluster.get(_path(cluster, lost)))) from e
                assert record.reason == "node_lost", record
                stops_by = record.old_attempt_stops_by_ms
                assert stops_by is not None, record  # it renewed a lease: the replacement waits
                assert choose(redis_url, "cut", lost, "fresh")  # the master's choice does not skip it

                async def second_pod() -> dict[str, Any] | None:
                    return next((p for p in await cluster.pods("cut") if gen(p) == 2), None)

                second = await eventually(second_pod, timeout=HANG, what="the replacement's Pod")
                assert _created_ms(second) >= stops_by - 1000  # creationTimestamp has whole seconds
                # the old container ended by itself, the partition still in place
                container = await eventually(
                    lambda: _found(_ended_container(real_node, first["metadata"]["name"])),
                    timeout=HANG,
                    what="the cut-off container ended",
                )
                assert container, container
                old = [q for q in api.snapshot() if q.attempt == lost]
                assert old and max(q.wall for q in old) * 1000 < stops_by
                assert any(q.wall * 1000 > cut_at for q in old), "it kept calling its model while cut off"
                real_node.heal()
                partitioned = False

                gone = _path(cluster, lost)
                await eventually(lambda: _absent(cluster, gone), timeout=HANG, what="the fenced Pod removed")
                new = eid(second)

                def replacement_talking() -> bool | None:
                    return any(q.attempt == new for q in api.snapshot()) or None

                await eventually(replacement_talking, timeout=HANG, what="the replacement calling its model")
                requests = api.snapshot()
                assert overlaps(requests, {lost: new}) == []
                assert fence(redis_url, "cut", new) is None  # nothing fenced twice
    finally:
        if partitioned:
            real_node.heal()
        await kubelet.stop_heartbeat(other)
        await kubelet.delete_node(other)

    assert cluster.created("pods", f"swarm-{new}") == 1
    assert cluster.count("create", "pods") == 2


def _path(cluster: Cluster, execution_id: str) -> str:
    return f"/api/v1/namespaces/{cluster.namespace}/pods/swarm-{execution_id}"


async def _absent(cluster: Cluster, path: str) -> bool:
    return await cluster.get(path) is None


def _ended_container(real_node: Any, pod_name: str) -> str | None:
    """The worker container of ``pod_name`` once containerd shows its task stopped (the kubelet, cut
    off, cannot report it), else ``None``."""
    found = real_node.ctr("containers", "list", f'labels."io.kubernetes.pod.name"=={pod_name}')
    ids = [ln.split()[0] for ln in found.stdout.splitlines()[1:] if "worker" in ln]
    if not ids:
        return None
    tasks = real_node.ctr("tasks", "list").stdout.splitlines()[1:]
    status = {ln.split()[0]: ln.split()[-1] for ln in tasks if ln.split()}
    stopped = [c for c in ids if status.get(c, "STOPPED") == "STOPPED"]
    return stopped[0] if stopped and len(stopped) == len(ids) else None
