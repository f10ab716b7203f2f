"""Benchmark a lost node (issue 44): how long until a partitioned seat runs again, beside the peers.

Servers: the tests' control plane on loopback (etcd, kube-apiserver, kube-controller-manager with a
4 s node grace), a private redis-server, one real node (containerd, runc, a real kubelet and
kube-scheduler; root only) and one simulated node (a heartbeat loop; this process writes the Pods
bound to it Running), which stands for the rest of the node pool.

Each round puts three workloads' Pods on the real node (they prefer it and tolerate its taint):

- the product: a Swarm seat running the probe image. Its worker's lease renewals (every quarter of
  ``--lease``) are sent for it from this process straight to Redis, as an acknowledged renewal
  records them, until the node is cut off (a cut-off worker cannot renew);
- the Kubernetes Job controller: an Indexed Job of one completion (``podReplacementPolicy: Failed``);
- a StatefulSet of one replica.

Then the real node is partitioned (every packet of its kubelet's connections dropped both ways; its
containers keep running) and each workload's replacement is awaited for ``--window`` seconds on the
simulated node. Clock: the cut → the replacement's container running. For the product the time is
split: the node ``Unknown`` (as this process reads it), the fence, the end of the recorded lease
wait, the replacement created, running. The peers are not expected to replace at all while the node
is unreachable: the Job controller waits for a terminal Pod (kubernetes/enhancements#6262), the
StatefulSet for the Pod object to be gone (a force delete); a peer that does not replace within the
window is printed as "none in W s". The node is healed and everything deleted between rounds.

Not a test: it asserts nothing. Run: ``sudo .venv/bin/python bench/nodelost.py`` (about 3 minutes a
round).
"""

from __future__ import annotations

import argparse
import asyncio
import calendar
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))

import realplane
import redis
from agentihooks_operator.recovery.store.keys import SwarmKeys
from agentihooks_operator.recovery.store.records import FenceRecord
from realplane import SESSION, BenchKubelet, NativeCatalog, note, pct
from testsupport import kubelet as kl
from testsupport.images import PROBE_REF, probe_image
from testsupport.kube import running_operator
from testsupport.realnode import IMAGES, MARK, RealNode
from testsupport.redis_server import RedisServer

SIM = "bench-pool"
PEERS_NS = "bench-peers"
#: Prefer the real node (and tolerate its taint); anywhere else in the pool when it is gone.
PLACEMENT: dict[str, Any] = {
    "affinity": {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "preference": {"matchExpressions": [{"key": MARK, "operator": "In", "values": ["true"]}]},
                }
            ]
        }
    },
    "tolerations": [{"key": MARK, "operator": "Exists", "effect": "NoSchedule"}],
}
SECURITY = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "seccompProfile": {"type": "RuntimeDefault"},
}
CONTAINER = {
    "name": "worker",
    "image": PROBE_REF,
    "imagePullPolicy": "Never",
    "env": [{"name": "PROBE_MODE", "value": "wait"}],
    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "48Mi"}},
    "securityContext": SECURITY,
}


async def pods(cluster: Any) -> list[dict[str, Any]]:
    out = []
    for ns in (cluster.namespace, PEERS_NS):
        r = await cluster.http.get(f"/api/v1/namespaces/{ns}/pods")
        r.raise_for_status()
        out += r.json()["items"]
    return out


def running(pod: dict[str, Any]) -> bool:
    return any(
        "running" in (cs.get("state") or {})
        for cs in (pod.get("status") or {}).get("containerStatuses") or []
    )


def owner(pod: dict[str, Any]) -> str:
    labels = pod["metadata"].get("labels") or {}
    if "swarm.agentihooks.io/swarm" in labels:
        return "product"
    return "job" if "job-name" in labels else "statefulset"


async def create(cluster: Any, round_: int, lease: int) -> str:
    spec = realplane.swarm_spec(1, interval=1.0)
    spec["image"] = PROBE_REF
    spec["seats"][0]["task"]["id"] = f"t-lost-{round_}"
    spec["recovery"] = {**spec.get("recovery", {}), "workerLeaseSeconds": lease, "automation": True}
    spec["podTemplate"] = {
        "spec": {
            **PLACEMENT,
            "terminationGracePeriodSeconds": 1,
            "container": {k: CONTAINER[k] for k in ("imagePullPolicy", "env", "resources")},
        }
    }
    name = f"lost-{round_}"
    await cluster.create_swarm(name, spec)
    template = {"spec": {**PLACEMENT, "terminationGracePeriodSeconds": 1, "containers": [CONTAINER]}}
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": PEERS_NS},
        "spec": {
            "completionMode": "Indexed",
            "completions": 1,
            "parallelism": 1,
            "backoffLimitPerIndex": 3,
            "podReplacementPolicy": "Failed",
            "template": {"spec": {**template["spec"], "restartPolicy": "Never"}},
        },
    }
    labels = {"app": name}
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": PEERS_NS},
        "spec": {
            "replicas": 1,
            "serviceName": name,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": template["spec"]},
        },
    }
    for path, body in (
        (f"/apis/batch/v1/namespaces/{PEERS_NS}/jobs", job),
        (f"/apis/apps/v1/namespaces/{PEERS_NS}/statefulsets", sts),
    ):
        r = await cluster.http.post(path, json=body)
        r.raise_for_status()
    return name


async def one_round(
    args: argparse.Namespace,
    cluster: Any,
    node: RealNode,
    sim: BenchKubelet,
    client: redis.Redis,
    round_: int,
) -> dict[str, float | None]:
    name = await create(cluster, round_, args.lease)
    deadline = time.monotonic() + 180
    first: dict[str, dict[str, Any]] = {}
    while len(first) < 3:  # every workload's Pod running on the real node
        if time.monotonic() > deadline:
            raise TimeoutError("the Pods did not all run on the real node")
        first = {
            owner(p): p for p in await pods(cluster) if running(p) and p["spec"].get("nodeName") == node.name
        }
        await asyncio.sleep(0.2)
    eid = first["product"]["metadata"]["labels"]["swarm.agentihooks.io/execution-id"]
    keys = SwarmKeys("agentihooks", name, cluster.namespace)
    stop = asyncio.Event()

    async def renew() -> None:  # the worker's acknowledged renewals, until it is cut off
        while not stop.is_set():
            beat = {
                "session_id": SESSION,  # it held a native session: resumed with no decision (NativeCatalog)
                "lease_at_ms": int(time.time() * 1000),
                "lease_ms": args.lease * 1000,
                "at_ms": int(time.time() * 1000),
            }
            await asyncio.to_thread(client.hset, keys.heartbeats, eid, json.dumps(beat))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), args.lease / 4)

    renewing = asyncio.create_task(renew())
    await asyncio.sleep(1.0)
    stop.set()
    await renewing
    cut = time.time()
    await asyncio.to_thread(node.partition, 1)  # the kubelet's connections (no control API here)
    marks: dict[str, float | None] = {"unknown": None, "fence": None, "stops_by": None, "created": None}
    done: dict[str, float | None] = {"product": None, "job": None, "statefulset": None}
    seen = {p["metadata"]["uid"] for p in first.values()}
    end = time.monotonic() + args.window
    try:
        while time.monotonic() < end and (None in done.values()):
            now = time.time()
            if marks["unknown"] is None:
                r = await cluster.http.get(f"/api/v1/nodes/{node.name}")
                ready = next(
                    (c for c in r.json()["status"].get("conditions", []) if c["type"] == "Ready"), {}
                )
                if ready.get("status") == "Unknown":
                    marks["unknown"] = now - cut
            if marks["fence"] is None and (
                raw := await asyncio.to_thread(client.hget, keys.attempt_fences, eid)
            ):
                fence = FenceRecord.model_validate_json(raw)
                marks["fence"] = fence.fenced_at_ms / 1000 - cut
                if fence.old_attempt_stops_by_ms:
                    marks["stops_by"] = fence.old_attempt_stops_by_ms / 1000 - cut
            for p in await pods(cluster):
                if p["metadata"]["uid"] in seen:
                    continue
                who = owner(p)
                if who == "product" and marks["created"] is None:
                    stamp = p["metadata"]["creationTimestamp"]
                    marks["created"] = calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")) - cut
                if p["spec"].get("nodeName") == SIM and not running(p):
                    await sim.set_status(p["metadata"]["name"], kl.running(), node_name=SIM)
                if running(p) and done[who] is None:
                    done[who] = now - cut
            await asyncio.sleep(0.2)
    finally:
        await asyncio.to_thread(node.heal)
    for path in (
        f"/apis/agentihooks.io/v1alpha1/namespaces/{cluster.namespace}/swarms/{name}",
        f"/apis/batch/v1/namespaces/{PEERS_NS}/jobs/{name}",
        f"/apis/apps/v1/namespaces/{PEERS_NS}/statefulsets/{name}",
    ):
        await cluster.http.delete(path, params={"propagationPolicy": "Background"})
    await asyncio.to_thread(node.wait_ready, 120)
    for p in await pods(cluster):  # the round's Pods gone before the next (a force delete on the sim node)
        await cluster.http.delete(
            f"/api/v1/namespaces/{p['metadata']['namespace']}/pods/{p['metadata']['name']}",
            params={"gracePeriodSeconds": 0},
        )
    return {**marks, **done}


def row(label: str, values: list[float | None], window: float) -> str:
    got = [v for v in values if v is not None]
    missing = len(values) - len(got)
    if not got:
        return f"{label:<38} none in {window:.0f} s ({len(values)} of {len(values)} rounds)"
    tail = f", none in {window:.0f} s in {missing} round(s)" if missing else ""
    return f"{label:<38} p50 {pct(got, 0.5):6.1f} s  p99 {pct(got, 0.99):6.1f} s  (n={len(got)}{tail})"


async def measure(args: argparse.Namespace, work: Path) -> None:
    bindir = realplane.require_tools()
    redis_server = RedisServer(work / "redis")
    redis_server.start()
    results: list[dict[str, float | None]] = []
    try:
        async with realplane.real_cluster(bindir, work) as cluster:
            node = RealNode(cluster.plane)
            await asyncio.to_thread(node.up)
            try:
                await asyncio.to_thread(node.import_image, probe_image(IMAGES))
                r = await cluster.http.post("/api/v1/namespaces", json={"metadata": {"name": PEERS_NS}})
                r.raise_for_status()
                sim = BenchKubelet(cluster)
                await sim.put_node(SIM)
                client = redis.Redis.from_url(redis_server.url)
                async with running_operator(
                    cluster,
                    redis_server.url,
                    catalog=NativeCatalog(PROBE_REF.rsplit(":", 1)[1]),
                    node_lost_after_seconds=3.0,
                    lease_ms=15000,
                ):
                    for i in range(args.rounds):
                        results.append(await one_round(args, cluster, node, sim, client, i))
                        note(f"round {i + 1}/{args.rounds}: {results[-1]}")
            finally:
                await asyncio.to_thread(node.down)
    finally:
        redis_server.stop()
    w = args.window
    print(
        f"real node partitioned (the kubelet's connections dropped); lease {args.lease} s, "
        f"renewed every {args.lease / 4:g} s"
    )
    print("seconds from the cut:")
    for key, label in (
        ("unknown", "node Ready=Unknown (read by this process)"),
        ("fence", "product: fenced node_lost"),
        ("stops_by", "product: the lease wait ends"),
        ("created", "product: replacement created"),
        ("product", "product: replacement running"),
        ("job", "Job controller: replacement running"),
        ("statefulset", "StatefulSet: replacement running"),
    ):
        print(row(label, [r[key] for r in results], w))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--lease", type=int, default=30, help="the Swarm's workerLeaseSeconds")
    parser.add_argument("--window", type=float, default=120.0, help="seconds to wait for each replacement")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs)")
    realplane.run_on_real_node(measure, parser.parse_args(), "bench-nodelost-")


if __name__ == "__main__":
    main()
