"""A drained seat loses nothing (issue 25): evicted with a grace period, captured, resumed at its last record.

On the real control plane, with the operator in its own process holding the chart's RBAC and its
control API, a bucket store (moto) for the controller and the worker (the default set-up), and the
worker as a real ``agentihooks-worker boot`` process (fake Claude Code) started from the launch
record and credential the operator wrote for its Pod:

1. The first attempt runs, captures every half second and reports its session and watermark.
2. Its Pod is evicted through the Eviction API (what ``kubectl drain`` calls): the API server marks it
   ``DisruptionTarget`` and deletes it with the Pod's grace period. The stand-in kubelet keeps the
   container running for a while first, as a worker that is still taking its final capture would:
   all that time the operator must not fence the attempt (before, it fenced at the mark).
3. The kubelet's SIGTERM: the worker stops its harness, takes its final capture, reports it as
   final, and exits; the kubelet writes the exit and removes the Pod.
4. The fence reads ``evicted``, records the final watermark and names an empty lost tail; the
   operator resumes natively on its own from the final checkpoint; the replacement (again a real
   worker process) verifies it and resumes the session at its last record.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import boto3
import redis
from agentihooks_checkpoint.directive import Continuity
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores.s3 import S3Store
from testsupport.kube import eventually, operator_process
from testsupport.node import RealKubelet as Kubelet
from testsupport.processes import kill_tree
from testsupport.realcluster import RealCluster as Cluster
from testsupport.recovery import keys_of
from testsupport.redis_server import free_port
from testsupport.worker_boot import start_worker

from .conftest import swarm_spec
from .flows import eid, fence, fenced, launch_record, replacement, running_seat

PROJECT = "github.com/acme/app"


def _git_project(path: Path) -> Path:
    path.mkdir()
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "first"],
    ):
        if args[0] == "add":
            (path / "README.md").write_text("app\n")
        subprocess.run(["git", *args], cwd=path, check=True, capture_output=True)
    return path


def _beat(redis_url: str, swarm: str, execution_id: str) -> dict[str, Any]:
    client = redis.Redis.from_url(redis_url)
    try:
        raw = client.hget(keys_of(client, swarm).heartbeats, execution_id)
    finally:
        client.close()
    return json.loads(raw) if raw else {}


def _events(text: str, name: str) -> list[dict[str, Any]]:
    return [
        o for ln in text.splitlines() if ln.startswith("{") and (o := json.loads(ln)).get("event") == name
    ]


async def _pod_worker(
    cluster: Cluster, pod: dict[str, Any], folder: Path, project: Path, env: dict[str, str]
) -> subprocess.Popen[str]:
    """The Pod's container: the launch record and the credential from its Secret."""
    execution = eid(pod)
    await launch_record(cluster, execution)  # awaited: created beside the Pod
    ns = cluster.namespace
    secret = await cluster.get(f"/api/v1/namespaces/{ns}/secrets/swarm-{execution}-credential")
    token = base64.b64decode(secret["data"]["token"]).decode()
    record = base64.b64decode(secret["data"]["launch.json"]).decode()
    return start_worker(record, token, folder, project=PROJECT, worktree=project, **env)


async def test_an_evicted_seat_is_held_while_it_captures_and_resumes_at_its_last_record(
    cluster: Cluster, kubelet: Kubelet, redis_url: str, tmp_path: Path, s3_endpoint: str, s3_bucket: str
) -> None:
    project = _git_project(tmp_path / "project")
    store_env = {"AGENTIHOOKS_CHECKPOINT_BUCKET": s3_bucket, "AGENTIHOOKS_CHECKPOINT_ENDPOINT": s3_endpoint}
    store_env |= {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
    port = free_port()
    operator_env = {
        "AGENTIHOOKS_CONTROL_PORT": str(port),
        "AGENTIHOOKS_CONTROL_URL": f"http://127.0.0.1:{port}",  # what the launch records name
        **store_env,
    }
    store = S3Store(s3_bucket, boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1"))
    async with operator_process(cluster, redis_url, tmp_path, operator_id="op-drain", extra_env=operator_env):
        spec = swarm_spec(interval=0.2)
        await cluster.create_swarm("drain", spec)
        first = await running_seat(cluster, kubelet, "drain")
        assert first["spec"]["terminationGracePeriodSeconds"] == 60  # the default room for the capture
        lost = eid(first)
        worker = await _pod_worker(
            cluster,
            first,
            tmp_path / "first",
            project,
            {
                **store_env,
                "FAKE_HARNESS_RUN_SECONDS": "forever",
                "FAKE_HARNESS_TICK": "0.2",
                "AGENTIHOOKS_CAPTURE_INTERVAL_SECONDS": "0.5",
            },
        )
        try:
            before = await eventually(
                lambda: asyncio.to_thread(
                    lambda: (
                        (b := _beat(redis_url, "drain", lost)).get("session_id")
                        and (b.get("archive_watermark") or 0) >= 3
                        and b
                    )
                ),
                timeout=60,
                what="the first attempt's session and watermark reported",
            )
            while_running: list[Any] = []

            async def sigterm(pod: dict[str, Any]) -> None:
                """The kubelet within the grace period: the container still runs for a while (many
                passes), then gets SIGTERM and exits; its exit is written before the Pod is removed."""
                for _ in range(10):
                    await asyncio.sleep(0.3)
                    while_running.append(await asyncio.to_thread(fence, redis_url, "drain", lost))
                worker.send_signal(signal.SIGTERM)
                code = await asyncio.to_thread(worker.wait, 60)
                path = f"/api/v1/namespaces/{cluster.namespace}/pods/{pod['metadata']['name']}"
                statuses = (await cluster.get(path))["status"]
                term = {"exitCode": code, "reason": "Completed" if code == 0 else "Error"}
                term |= {"startedAt": "2026-12-02T00:00:00Z", "finishedAt": "2026-12-02T00:00:01Z"}
                body = {
                    "status": {
                        "containerStatuses": [
                            {**c, "state": {"terminated": term}, "ready": False, "started": False}
                            for c in statuses["containerStatuses"]
                        ]
                    }
                }
                r = await cluster.http.patch(
                    path + "/status", json=body, headers={"Content-Type": "application/merge-patch+json"}
                )
                assert r.status_code == 200, r.text

            kubelet.before_stop = sigterm
            await kubelet.evict(first["metadata"]["name"])
            record = await fenced(redis_url, "drain", lost)
        finally:
            if worker.poll() is None:
                kill_tree(worker.pid)  # the worker and its harness (its own process group)
            _, err = worker.communicate(timeout=30)
        kubelet.before_stop = None
        assert while_running and all(f is None for f in while_running), "fenced while its container ran"
        final = _beat(redis_url, "drain", lost)
        assert final["final_watermark"] == final["archive_watermark"] > before["archive_watermark"]
        assert record.reason == "evicted"
        assert (record.native_session, record.archive_watermark) == (
            before["session_id"],
            final["final_watermark"],
        )
        assert record.final_capture is True
        assert record.tail == (
            "Nothing is lost: the final capture archived the transcript through record "
            f"{final['final_watermark']}."
        )
        assert "/v1/executions/" not in err  # the control API's URLs stay out of the worker's lines

        second = await replacement(cluster, "drain", 2)  # nobody chose: the operator resumed natively
        launch = await launch_record(cluster, eid(second))
        assert launch.restore is not None and launch.restore.recovery is Continuity.NATIVE
        scope = StoreScope(swarm="drain", task_id="t-1", task_generation=1, namespace=cluster.namespace)
        complete = [c for c in store.list_checkpoints(scope, execution_id=lost) if c.complete]
        newest = max(complete, key=lambda c: c.checkpoint_sequence)
        assert launch.restore.checkpoint_id == newest.checkpoint_id  # the final capture's checkpoint
        assert launch.restore.watermark == final["final_watermark"]

        await kubelet.set_status(second["metadata"]["name"], _running(), node_name="kind-worker")
        resumed = await _pod_worker(cluster, second, tmp_path / "second", project, store_env)
        try:
            _, err2 = await asyncio.to_thread(resumed.communicate, None, 120)
        finally:
            if resumed.poll() is None:
                kill_tree(resumed.pid)
        assert resumed.returncode == 0, err2[-3000:]
        [verified] = _events(err2, "restore_verified")
        assert (verified["recovery"], verified["watermark"]) == ("native", final["final_watermark"])
        runs = [json.loads(ln) for ln in (tmp_path / "second" / "harness.log").read_text().splitlines()]
        assert runs[0]["argv"][-2:] == ["--resume", before["session_id"]]

    assert cluster.created("pods", f"swarm-{eid(second)}") == 1
    assert cluster.count("create", "pods") == 2


def _running() -> dict[str, Any]:
    from testsupport import kubelet as kl

    return kl.running()
