"""Pod status documents in the shape a real kubelet writes them (pure builders).

Container states (``running``, ``terminated`` with ``reason``/``exitCode``,
``waiting`` on an image pull), the ``Ready`` condition and the phase are what
the operator's classifier reads; these builders produce exactly those fields.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

NODE = "demo-node"


def ts() -> str:
    return datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _container(image: str, state: dict[str, Any], *, ready: bool = False) -> dict[str, Any]:
    return {
        "name": "worker",
        "image": image,
        "imageID": "",
        "ready": ready,
        "restartCount": 0,
        "started": ready,
        "state": state,
        "lastState": {},
    }


def _ready(status: str, reason: str | None = None) -> dict[str, Any]:
    cond: dict[str, Any] = {"type": "Ready", "status": status, "lastTransitionTime": ts()}
    if reason:
        cond["reason"] = reason
    return cond


def running(image: str, started: str) -> dict[str, Any]:
    return {
        "phase": "Running",
        "podIP": "127.0.0.1",
        "startTime": started,
        "conditions": [_ready("True")],
        "containerStatuses": [_container(image, {"running": {"startedAt": started}}, ready=True)],
    }


def terminated(image: str, exit_code: int, started: str, *, oom: bool = False) -> dict[str, Any]:
    reason = "OOMKilled" if oom else ("Completed" if exit_code == 0 else "Error")
    term = {"exitCode": exit_code, "reason": reason, "startedAt": started, "finishedAt": ts()}
    return {
        "phase": "Succeeded" if exit_code == 0 else "Failed",
        "conditions": [_ready("False", "PodCompleted" if exit_code == 0 else "PodFailed")],
        "containerStatuses": [_container(image, {"terminated": term})],
    }


def pull_failure(image: str, reason: str = "ErrImagePull") -> dict[str, Any]:
    return {
        "phase": "Pending",
        "conditions": [_ready("False", "ContainersNotReady")],
        "containerStatuses": [
            _container(image, {"waiting": {"reason": reason, "message": f"failed to pull image {image!r}"}})
        ],
    }


def never_started(image: str, exit_code: int) -> dict[str, Any]:
    """A spawn the kubelet gave up on before its container ran (Failed with the container's code)."""
    started = ts()
    return terminated(image, exit_code, started)


def node() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": NODE},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": ts(), "reason": "KubeletReady"}
            ]
        },
    }
