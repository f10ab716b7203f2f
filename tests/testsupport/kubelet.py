"""Plays the kubelet (and the node controller) against the emulated API: Pod and Node statuses.

The status builders return documents shaped like what real clusters write
(container statuses with ``terminated``/``waiting`` states, ``DisruptionTarget``
conditions, ``reason: Evicted``/``NodeLost``), so the classifier's unit tests
and the end-to-end tests use the same shapes. :class:`Kubelet` applies them
through ``PATCH .../pods/<name>/status`` as a kubelet would. Container entries,
the Ready condition and timestamps come from the demo's builders
(:mod:`agentihooks_demo.podstatus`), one source for both; the tests pin the
image and the transition times.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from agentihooks_demo import podstatus
from agentihooks_demo.podstatus import ts

IMAGE = "ghcr.io/agentihooks/worker:2.1.0"
NOW = datetime(2026, 11, 30, 9, 0, 0, tzinfo=UTC)


def _container(state: dict[str, Any], *, name: str = "worker", ready: bool = False) -> dict[str, Any]:
    return podstatus.container(IMAGE, state, ready=ready, name=name)


def _ready(status: str, reason: str | None = None) -> dict[str, Any]:
    return podstatus.ready_condition(status, reason, at=ts(NOW))


def pending() -> dict[str, Any]:
    return {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}


def running() -> dict[str, Any]:
    return {
        "phase": "Running",
        "podIP": "10.244.0.12",
        "startTime": ts(NOW),
        "conditions": [_ready("True")],
        "containerStatuses": [_container({"running": {"startedAt": ts(NOW)}}, ready=True)],
    }


def terminated(
    exit_code: int, reason: str, *, phase: str | None = None, init: bool = False
) -> dict[str, Any]:
    term = {"exitCode": exit_code, "reason": reason, "startedAt": ts(NOW), "finishedAt": ts(NOW)}
    status: dict[str, Any] = {
        "phase": phase or ("Succeeded" if exit_code == 0 else "Failed"),
        "conditions": [_ready("False", "PodFailed" if exit_code else "PodCompleted")],
    }
    if init:
        status["initContainerStatuses"] = [_container({"terminated": term}, name="restore")]
        status["containerStatuses"] = [_container({"waiting": {"reason": "PodInitializing"}})]
    else:
        status["containerStatuses"] = [_container({"terminated": term})]
    return status


def oom_killed(*, exit_code: int = 137, phase: str | None = None, init: bool = False) -> dict[str, Any]:
    return terminated(exit_code, "OOMKilled", phase=phase, init=init)


def application_exit(exit_code: int = 70) -> dict[str, Any]:
    return terminated(exit_code, "Error")


def succeeded() -> dict[str, Any]:
    return terminated(0, "Completed")


def evicted() -> dict[str, Any]:
    return {
        "phase": "Failed",
        "reason": "Evicted",
        "message": "The node was low on resource: memory. Threshold quantity: 100Mi, available: 90Mi.",
        "conditions": [_ready("False", "PodFailed")],
        "containerStatuses": [
            _container({"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown"}})
        ],
    }


def disruption(reason: str) -> dict[str, Any]:
    status = running()
    status["conditions"] = [
        *status["conditions"],
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": reason,
            "message": f"{reason}: the pod is going to be terminated",
            "lastTransitionTime": ts(NOW),
        },
    ]
    return status


def drained(exit_code: int = 143) -> dict[str, Any]:
    """An evicted Pod after its container stopped (SIGTERM, final capture, exit)."""
    status = disruption("EvictionByEvictionAPI")
    term = {"exitCode": exit_code, "reason": "Error", "startedAt": ts(NOW), "finishedAt": ts(NOW)}
    status["containerStatuses"] = [_container({"terminated": term})]
    return status


def node_lost_status() -> dict[str, Any]:
    status = running()
    status["reason"] = "NodeLost"
    status["message"] = "Node kind-worker which was running pod is unresponsive"
    return status


def node_not_ready_condition() -> dict[str, Any]:
    status = running()
    status["conditions"] = [_ready("False", "NodeNotReady")]
    return status


def pull_failure(reason: str = "ErrImagePull") -> dict[str, Any]:
    msg = {"ErrImagePull": "rpc error: code = NotFound", "ImagePullBackOff": "Back-off pulling image"}
    return {
        "phase": "Pending",
        "conditions": [_ready("False", "ContainersNotReady")],
        "containerStatuses": [
            _container({"waiting": {"reason": reason, "message": msg.get(reason, "invalid reference")}})
        ],
    }


def node(name: str, *, ready: str = "True", since: datetime = NOW) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "lastTransitionTime": ts(since)},
                {"type": "Ready", "status": ready, "lastTransitionTime": ts(since), "reason": "KubeletReady"},
            ]
        },
    }


def pod(
    status: dict[str, Any], *, node_name: str | None = "kind-worker", deleting: bool = False
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "swarm-exe-1", "namespace": "default"}
    if deleting:
        meta["deletionTimestamp"] = ts(NOW)
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [{"name": "worker", "image": "w:1"}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


class Kubelet:
    """Writes Pod statuses through the API as the kubelet does (``/status`` merge patches)."""

    def __init__(self, server: str, namespace: str = "default", *, timeout: float = 10) -> None:
        self.server = server
        self.namespace = namespace
        self._http = httpx.AsyncClient(base_url=server, timeout=timeout)

    async def close(self) -> None:
        await self._http.aclose()

    def _pod_path(self, name: str) -> str:
        return f"/api/v1/namespaces/{self.namespace}/pods/{name}"

    async def set_status(self, name: str, status: dict[str, Any], *, node_name: str | None = None) -> None:
        if node_name:
            r = await self._http.patch(
                self._pod_path(name),
                json={"spec": {"nodeName": node_name}},
                headers={"Content-Type": "application/merge-patch+json"},
            )
            r.raise_for_status()
        # Lists are replaced wholesale by a merge patch; null out what the new status lacks.
        body = {
            "status": {k: None for k in ("reason", "message", "containerStatuses", "conditions")} | status
        }
        r = await self._http.patch(
            self._pod_path(name) + "/status",
            json=body,
            headers={"Content-Type": "application/merge-patch+json"},
        )
        r.raise_for_status()

    async def delete(self, name: str) -> None:
        r = await self._http.delete(self._pod_path(name))
        r.raise_for_status()

    async def put_node(self, name: str, *, ready: str = "True", since: datetime | None = None) -> None:
        doc = node(name, ready=ready, since=since or datetime.now(tz=UTC))
        r = await self._http.get(f"/api/v1/nodes/{name}")
        if r.status_code == 404:
            r = await self._http.post("/api/v1/nodes", json=doc)
        else:
            r = await self._http.patch(
                f"/api/v1/nodes/{name}/status",
                json={"status": doc["status"]},
                headers={"Content-Type": "application/merge-patch+json"},
            )
        r.raise_for_status()

    async def delete_node(self, name: str) -> None:
        r = await self._http.delete(f"/api/v1/nodes/{name}")
        r.raise_for_status()


def long_ago(seconds: float) -> datetime:
    return datetime.now(tz=UTC) - timedelta(seconds=seconds)
