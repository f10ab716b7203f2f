"""Pod status documents in the shape a real kubelet writes them (pure builders).

Container states (``running``, ``terminated`` with ``reason``/``exitCode``,
``waiting`` on an image pull), the ``Ready`` condition and the phase are what
the operator's classifier reads; these builders produce exactly those fields.
The test suite's kubelet builds its statuses from the same pieces
(:func:`container`, :func:`ready_condition`), so the demo and the tests cannot
drift apart on what a kubelet writes.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

NODE = "demo-node"


def ts(at: datetime | None = None) -> str:
    """``at`` (default: now) as the API's second-precision UTC timestamp."""
    return (at or datetime.now(tz=UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")


def container(
    image: str, state: dict[str, Any], *, ready: bool = False, name: str = "agent"
) -> dict[str, Any]:
    """One entry of ``containerStatuses`` (or ``initContainerStatuses``) in ``state``."""
    return {
        "name": name,
        "image": image,
        "imageID": "",
        "ready": ready,
        "restartCount": 0,
        "started": ready,
        "state": state,
        "lastState": {},
    }


def ready_condition(status: str, reason: str | None = None, *, at: str | None = None) -> dict[str, Any]:
    """The Pod's ``Ready`` condition, changed at ``at`` (default: now)."""
    cond: dict[str, Any] = {"type": "Ready", "status": status, "lastTransitionTime": at or ts()}
    if reason:
        cond["reason"] = reason
    return cond


def running(image: str, started: str) -> dict[str, Any]:
    return {
        "phase": "Running",
        "podIP": "127.0.0.1",
        "startTime": started,
        "conditions": [ready_condition("True")],
        "containerStatuses": [container(image, {"running": {"startedAt": started}}, ready=True)],
    }


def terminated(image: str, exit_code: int, started: str, *, oom: bool = False) -> dict[str, Any]:
    reason = "OOMKilled" if oom else ("Completed" if exit_code == 0 else "Error")
    term = {"exitCode": exit_code, "reason": reason, "startedAt": started, "finishedAt": ts()}
    return {
        "phase": "Succeeded" if exit_code == 0 else "Failed",
        "conditions": [ready_condition("False", "PodCompleted" if exit_code == 0 else "PodFailed")],
        "containerStatuses": [container(image, {"terminated": term})],
    }


def pull_failure(image: str, reason: str = "ErrImagePull") -> dict[str, Any]:
    return {
        "phase": "Pending",
        "conditions": [ready_condition("False", "ContainersNotReady")],
        "containerStatuses": [
            container(image, {"waiting": {"reason": reason, "message": f"failed to pull image {image!r}"}})
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
