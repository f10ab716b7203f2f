"""Real deaths on a real node (issue 24): the kernel, the process or a drain ends the worker.

The session's control plane gets a real node for this module (containerd, runc, a real kubelet and
kube-scheduler; testsupport/realnode.py). The Swarm's Pods select it and run the probe image
(testsupport/images.py): Debian's static busybox on a read-only root as uid 1000, whose first
generation dies one of three real ways: it allocates past its 48 MiB limit and the memory cgroup
kills it (the kubelet reports ``OOMKilled``), its process exits 3, or it is drained through the
Eviction API and the kubelet stops it. The operator (the chart's RBAC only) fences that attempt with
the matching reason (``oom_killed``, ``application_exit``, ``evicted``) and releases it once. After
the decision it launches exactly one replacement (the audit log counts the creates), which the real
runtime starts with the security context the operator asked for: no capabilities, no new
privileges, seccomp filtering, a read-only root and a non-root user, read from the container's own
process on this machine.

Two more deaths need more than the probe's own process:

* **image_pull**: the Swarm names an image on a registry nobody serves (a closed loopback port). The
  real kubelet's pull fails (``ErrImagePull``, then ``ImagePullBackOff``); after the Swarm's grace the
  attempt is fenced ``image_pull``. The image is then fixed in the Swarm, and the decision's one
  replacement really runs the new one.
* **node_lost**: the real kubelet is stopped; its container keeps running, the node goes silent
  and the node lifecycle controller marks it ``Unknown`` and taints it ``unreachable``. A second,
  API-only Node (a heartbeat loop) keeps the controller out of its single-node "disruption mode",
  as on a real cluster. The operator fences the attempt ``node_lost`` once the node has been lost
  for its ``node_lost_after_seconds``; the kubelet comes back, finds the fenced Pod deleted, stops its
  container, and the one replacement runs there.

A drain is held: with a 6 s grace period the real kubelet's SIGTERM is ignored by the probe (as a
worker still taking its final capture), and the operator fences the attempt only once the container
has ended, never beside it running.

And a fault: the kubelet restarted (down 1 s) as the first attempt dies, as the decision is applied,
as the replacement Pod appears and while it runs starts nothing twice: one fence, one replacement
Pod, one container for it in containerd, never restarted.

The real worker image dies on this node in test_real_worker_image.py; the chart installed with its
own images (the operator itself in a Pod) in tests/integration/chart/test_chart_on_real_node.py.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from testsupport.images import PROBE_REF
from testsupport.kube import eventually, running_operator
from testsupport.realcluster import RealCluster as Cluster
from testsupport.realnode import POD_TEMPLATE, proc_status

from .conftest import swarm_spec
from .flows import choose, eid, fence, fenced, gen, pod_deleted, replacement

MERGE = {"Content-Type": "application/merge-patch+json"}

pytestmark = pytest.mark.slow


def probe_spec(mode: str) -> dict[str, Any]:
    spec = swarm_spec()
    spec["image"] = PROBE_REF
    spec["podTemplate"] = {
        "spec": {
            **POD_TEMPLATE,
            "terminationGracePeriodSeconds": 2,
            "container": {
                "imagePullPolicy": "Never",
                "env": [{"name": "PROBE_MODE", "value": mode}],
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "48Mi"}},
            },
        }
    }
    return spec


async def _evict_when_running(cluster: Cluster, pod: dict[str, Any]) -> None:
    """What ``kubectl drain`` does to a running worker: the Eviction API, and the kubelet stops it."""
    path = f"/api/v1/namespaces/{cluster.namespace}/pods/{pod['metadata']['name']}"

    async def running() -> bool:
        return "running" in _container_state(await cluster.get(path))

    await eventually(running, timeout=90, what="the first attempt's container running")
    meta = {"name": pod["metadata"]["name"], "namespace": cluster.namespace}
    r = await cluster.http.post(
        path + "/eviction", json={"apiVersion": "policy/v1", "kind": "Eviction", "metadata": meta}
    )
    assert r.status_code == 201, r.text


# (PROBE_MODE, what the test does to the first attempt, the reason the operator must record)
DEATHS = [
    ("oom", None, "oom_killed"),  # the kernel's memory cgroup kills it
    ("exit", None, "application_exit"),  # the agent's process exits 3
    ("wait", _evict_when_running, "evicted"),  # drained through the Eviction API
]


def _container_state(pod: dict[str, Any] | None) -> dict[str, Any]:
    statuses = ((pod or {}).get("status") or {}).get("containerStatuses") or []
    return dict(statuses[0].get("state") or {}) if statuses else {}


def _process_of() -> Path | None:
    """The /proc folder of the probe's ``busybox sleep`` (only the replacement runs one: the first
    attempt died before reaching it)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (proc / "cmdline").read_bytes().split(b"\0")[:3] != [b"/bin/busybox", b"sleep", b"100000"]:
                continue
            if b"AGENTIHOOKS_LAUNCH_RECORD=" in (proc / "environ").read_bytes():
                return proc
        except OSError:
            continue
    return None


async def test_the_real_node_stays_ready_between_its_heartbeats(cluster: Cluster, real_node: Any) -> None:
    """A healthy node must never look lost: the test control plane calls a node silent for 4 s
    ``Unknown`` and taints it ``unreachable`` (NoExecute), so the taint manager evicts its Pods. With
    the kubelet's default 10 s Lease renewal that happened most of every 10 s, and a Pod waiting on an
    image pull was evicted and fenced ``node_lost``. Watched for longer than that default period."""
    path = f"/api/v1/nodes/{real_node.name}"
    loop = asyncio.get_running_loop()
    end = loop.time() + 12.0
    while loop.time() < end:
        node = await cluster.get(path) or {}
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "True", ready
        taints = [t["key"] for t in node.get("spec", {}).get("taints") or []]
        assert "node.kubernetes.io/unreachable" not in taints, taints
        await asyncio.sleep(0.25)


@pytest.mark.parametrize(("mode", "act", "reason"), DEATHS, ids=[d[2] for d in DEATHS])
async def test_a_real_death_is_fenced_once_and_exactly_one_replacement_really_runs(
    cluster: Cluster, real_node: Any, redis_url: str, mode: str, act: Any, reason: str
) -> None:
    async with running_operator(cluster, redis_url):
        await cluster.create_swarm("oom", probe_spec(mode))

        async def first_pod() -> dict[str, Any] | None:
            return next((p for p in await cluster.pods("oom") if gen(p) == 1), None)

        first = await eventually(first_pod, timeout=90, what="the first attempt's Pod")
        lost = eid(first)
        if act is not None:
            await act(cluster, first)
        record = await fenced(redis_url, "oom", lost)  # as the real kubelet reported the death
        assert record.reason == reason, record
        assert record.generation == 1
        await eventually(
            lambda: (f := fence(redis_url, "oom", lost)) is not None and f.released == ["grant", "account"],
            what="both releases recorded once",
        )
        await eventually(lambda: pod_deleted(cluster, lost), what="the fenced Pod deleted")
        assert [p for p in await cluster.pods("oom") if gen(p) == 2] == []  # nothing before the decision

        assert choose(redis_url, "oom", lost, "fresh")
        second = await replacement(cluster, "oom", 2)

        async def running() -> dict[str, Any] | None:
            pod = await cluster.get(
                f"/api/v1/namespaces/{cluster.namespace}/pods/{second['metadata']['name']}"
            )
            return pod if "running" in _container_state(pod) else None

        pod = await eventually(running, timeout=90, what="the replacement's container running")
        assert pod["spec"]["nodeName"] == real_node.name
        proc = await eventually(lambda: _async(_process_of()), timeout=30, what="its process")
        assert proc_status(proc, "CapEff") == "0000000000000000"  # every capability dropped
        assert proc_status(proc, "NoNewPrivs") == "1"
        assert proc_status(proc, "Seccomp") == "2"  # RuntimeDefault: a filter is loaded
        assert proc_status(proc, "Uid").split()[0] == "1000"
        root = next(ln for ln in (proc / "mountinfo").read_text().splitlines() if ln.split()[4] == "/")
        assert "ro" in root.split()[5].split(","), root  # the root filesystem is read-only

    assert cluster.count("create", "pods", f"swarm-{eid(second)}") == 1
    assert cluster.count("create", "pods") == 2


async def _async(value: Any) -> Any:
    return value


async def test_a_drained_pod_is_held_until_the_real_kubelet_has_stopped_it(
    cluster: Cluster, real_node: Any, redis_url: str
) -> None:
    """A drain on the real node: the Eviction API marks and deletes the Pod, the real kubelet sends
    SIGTERM, which the probe ignores (PID 1 without a handler) as a worker still taking its final
    capture would, and kills it when its 6 s grace period ends. All that time the operator holds the
    attempt; it fences it ``evicted`` only once the container has ended (before, it fenced at the
    mark, with the container still running)."""
    spec = probe_spec("wait")
    spec["podTemplate"]["spec"]["terminationGracePeriodSeconds"] = 6
    async with running_operator(cluster, redis_url):
        await cluster.create_swarm("drain", spec)
        first = await eventually(lambda: _pod_of(cluster, "drain", 1), timeout=90, what="the first Pod")
        lost = eid(first)
        path = f"/api/v1/namespaces/{cluster.namespace}/pods/{first['metadata']['name']}"
        await _evict_when_running(cluster, first)
        held: list[bool] = []  # each poll: the container still ran in its grace period, unfenced

        async def fenced_once_stopped() -> Any:
            record = await asyncio.to_thread(fence, redis_url, "drain", lost)  # the fence first,
            pod = await cluster.get(path)  # then the Pod: a fence seen beside a running container is early
            running = "running" in _container_state(pod)
            assert record is None or not running, ("fenced while its container ran", record, pod)
            if record is None and running and (pod or {}).get("metadata", {}).get("deletionTimestamp"):
                held.append(True)
            return record

        record = await eventually(fenced_once_stopped, timeout=60, what="the fence after the drain")
        assert record.reason == "evicted", record
        assert held, "the container was never seen running in its grace period"
        assert [p for p in await cluster.pods("drain") if gen(p) == 2] == []  # automation: no checkpoint


async def _pod_of(cluster: Cluster, swarm: str, generation: int) -> dict[str, Any] | None:
    return next((p for p in await cluster.pods(swarm) if gen(p) == generation), None)


async def _running(cluster: Cluster, pod: dict[str, Any]) -> dict[str, Any] | None:
    found = await cluster.get(f"/api/v1/namespaces/{cluster.namespace}/pods/{pod['metadata']['name']}")
    return found if "running" in _container_state(found) else None


async def test_an_image_no_registry_serves_is_fenced_image_pull_after_the_grace(
    cluster: Cluster, real_node: Any, redis_url: str
) -> None:
    spec = probe_spec("wait")
    spec["image"] = "127.0.0.1:9/agentihooks/unreachable:1"  # a closed port: no registry answers
    spec["podTemplate"]["spec"]["container"]["imagePullPolicy"] = "Always"
    spec["recovery"]["imagePullGraceSeconds"] = 3
    async with running_operator(cluster, redis_url):
        await cluster.create_swarm("pull", spec)
        first = await eventually(lambda: _pod_of(cluster, "pull", 1), timeout=90, what="the first Pod")
        lost = eid(first)
        path = f"/api/v1/namespaces/{cluster.namespace}/pods/{first['metadata']['name']}"

        async def pull_failing() -> str | None:
            waiting = _container_state(await cluster.get(path)).get("waiting") or {}
            reason = waiting.get("reason")
            return reason if reason in ("ErrImagePull", "ImagePullBackOff") else None

        await eventually(pull_failing, timeout=60, what="the real kubelet reporting the failed pull")
        record = await fenced(redis_url, "pull", lost)
        assert record.reason == "image_pull", record
        await eventually(
            lambda: (f := fence(redis_url, "pull", lost)) is not None and f.released == ["grant", "account"],
            what="both releases recorded once",
        )
        # the Swarm's owner fixes the image; the decision's one replacement runs it
        fixed = {"image": PROBE_REF, "podTemplate": probe_spec("wait")["podTemplate"]}
        r = await cluster.http.patch(
            f"/apis/agentihooks.io/v1alpha1/namespaces/{cluster.namespace}/swarms/pull",
            json={"spec": fixed},
            headers=MERGE,
        )
        assert r.status_code == 200, r.text
        assert choose(redis_url, "pull", lost, "fresh")
        second = await replacement(cluster, "pull", 2)
        assert second["spec"]["containers"][0]["image"] == PROBE_REF
        await eventually(lambda: _running(cluster, second), timeout=90, what="the replacement running")
        await eventually(lambda: pod_deleted(cluster, lost), what="the fenced Pod deleted")

    assert cluster.created("pods", f"swarm-{eid(second)}") == 1
    assert cluster.count("create", "pods") == 2


async def test_a_node_whose_kubelet_stops_is_lost_and_the_replacement_runs_when_it_returns(
    cluster: Cluster, real_node: Any, kubelet: Any, redis_url: str
) -> None:
    other = "agentihooks-api-node"  # keeps the node lifecycle controller out of disruption mode
    await kubelet.put_node(other)
    try:
        async with running_operator(cluster, redis_url, node_lost_after_seconds=3.0):
            await cluster.create_swarm("lost", probe_spec("wait"))
            first = await eventually(lambda: _pod_of(cluster, "lost", 1), timeout=90, what="the first Pod")
            await eventually(lambda: _running(cluster, first), timeout=90, what="its container running")
            lost = eid(first)
            real_node.stop_kubelet()
            try:
                node_path = f"/api/v1/nodes/{real_node.name}"

                async def unreachable() -> bool:
                    taints = ((await cluster.get(node_path)) or {}).get("spec", {}).get("taints") or []
                    return any(
                        t["key"] == "node.kubernetes.io/unreachable" and t["effect"] == "NoExecute"
                        for t in taints
                    )

                await eventually(unreachable, timeout=60, what="the silent node tainted unreachable")
                record = await fenced(redis_url, "lost", lost)
                assert record.reason == "node_lost", record
                await eventually(
                    lambda: (
                        (f := fence(redis_url, "lost", lost)) is not None
                        and f.released == ["grant", "account"]
                    ),
                    what="both releases recorded once",
                )
                await eventually(lambda: pod_deleted(cluster, lost), what="the fenced Pod's deletion asked")
                assert choose(redis_url, "lost", lost, "fresh")
                second = await replacement(cluster, "lost", 2)
            finally:
                real_node.start_kubelet()
            # the kubelet is back: it stops the fenced Pod's container, and runs the replacement
            gone = f"/api/v1/namespaces/{cluster.namespace}/pods/swarm-{lost}"
            await eventually(lambda: _absent(cluster, gone), timeout=90, what="the fenced Pod removed")
            pod = await eventually(
                lambda: _running(cluster, second), timeout=90, what="the replacement running"
            )
            assert pod["spec"]["nodeName"] == real_node.name
    finally:
        await kubelet.stop_heartbeat(other)
        await kubelet.delete_node(other)

    assert cluster.created("pods", f"swarm-{eid(second)}") == 1
    assert cluster.count("create", "pods") == 2


async def _absent(cluster: Cluster, path: str) -> bool:
    return await cluster.get(path) is None


def _containers_of(real_node: Any, pod_name: str) -> list[str]:
    """The worker containers containerd holds for one Pod (its sandbox left out), running or not."""
    res = real_node.ctr("containers", "list", f'labels."io.kubernetes.pod.name"=={pod_name}')
    assert res.returncode == 0, res.stderr
    return [ln.split()[0] for ln in res.stdout.splitlines()[1:] if PROBE_REF in ln]


async def test_a_kubelet_restarted_at_each_step_of_a_recovery_runs_nothing_twice(
    cluster: Cluster, real_node: Any, redis_url: str
) -> None:
    """The kubelet is restarted (down 1 s, inside the node grace) as the first attempt dies, as the
    decision is applied and as its replacement Pod appears: it finds what runs and starts nothing
    again. One fence, one replacement Pod, one container for it, never restarted."""

    async def restart() -> None:
        await asyncio.to_thread(real_node.restart_kubelet, 1.0)

    async with running_operator(cluster, redis_url):
        await cluster.create_swarm("restart", probe_spec("oom"))
        first = await eventually(lambda: _pod_of(cluster, "restart", 1), timeout=90, what="the first Pod")
        lost = eid(first)

        async def died() -> bool:
            path = f"/api/v1/namespaces/{cluster.namespace}/pods/{first['metadata']['name']}"
            found = await cluster.get(path)
            return "terminated" in _container_state(found)

        await eventually(died, timeout=90, what="the first attempt killed by the kernel")
        await restart()
        record = await fenced(redis_url, "restart", lost)
        assert record.reason == "oom_killed", record
        assert choose(redis_url, "restart", lost, "fresh")
        await restart()
        second = await replacement(cluster, "restart", 2)
        await restart()
        pod = await eventually(lambda: _running(cluster, second), timeout=90, what="the replacement running")
        assert pod["status"]["containerStatuses"][0]["restartCount"] == 0
        assert len(_containers_of(real_node, second["metadata"]["name"])) == 1
        await restart()  # once more while it runs: the kubelet adopts the running container
        await asyncio.sleep(3)
        pod = await eventually(lambda: _running(cluster, second), timeout=60, what="still running")
        assert pod["status"]["containerStatuses"][0]["restartCount"] == 0
        assert len(_containers_of(real_node, second["metadata"]["name"])) == 1
        assert fence(redis_url, "restart", eid(second)) is None  # the replacement was never fenced
        assert fence(redis_url, "restart", lost).released == ["grant", "account"]

    assert cluster.created("pods", f"swarm-{eid(second)}") == 1
    assert cluster.count("create", "pods") == 2
