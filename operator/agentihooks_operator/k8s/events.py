"""Kubernetes Events for every fence, decision, replacement and outcome, on the Swarm and on the Pod.

The recovery core keeps its own telemetry stream in Redis; after each pass the
operator turns new entries (and the pass's launches) into ``v1`` Events so
``kubectl describe swarm`` and ``kubectl get events`` tell the same story.
Event messages carry ids, reasons and generations only: never a credential or
conversation content.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .building.pods import pod_name
from .crd import API_VERSION, KIND

COMPONENT = "agentihooks-operator"


def reporting_instance() -> str:
    """Which operator replica reported an Event (``reportingInstance``): its id (the chart sets the Pod
    name), else the host name; at most 128 characters, as the API server allows."""
    return (os.environ.get("AGENTIHOOKS_OPERATOR_ID") or socket.gethostname() or COMPONENT)[:128]


@dataclass(frozen=True)
class Notice:
    """One thing worth an Event: ``reason`` is CamelCase (``Fenced``, ``Decided``, ``Replaced``...)."""

    reason: str
    message: str
    execution_id: str | None = None
    warning: bool = False


def build_event(
    notice: Notice, *, namespace: str, involved: dict[str, Any], now: datetime | None = None
) -> dict[str, Any]:
    stamp = (now or datetime.now(tz=UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{involved['name']}.{uuid.uuid4().hex[:16]}",
            "namespace": namespace,
        },
        "involvedObject": {**involved, "namespace": namespace},
        "reason": notice.reason,
        "message": notice.message[:1024],
        "type": "Warning" if notice.warning else "Normal",
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": reporting_instance(),
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


def events_for(notice: Notice, *, swarm: str, namespace: str, swarm_uid: str | None) -> list[dict[str, Any]]:
    """The Event on the Swarm and, when the notice names an attempt, the same Event on its Pod."""
    out = [build_event(notice, namespace=namespace, involved=_on_swarm(swarm, swarm_uid))]
    if notice.execution_id:
        out.append(_on_pod(notice, namespace))
    return out


def _on_swarm(swarm: str, uid: str | None) -> dict[str, Any]:
    ref: dict[str, Any] = {"apiVersion": API_VERSION, "kind": KIND, "name": swarm}
    if uid:
        ref["uid"] = uid
    return ref


def _on_pod(notice: Notice, namespace: str) -> dict[str, Any]:
    on_pod = {"apiVersion": "v1", "kind": "Pod", "name": pod_name(str(notice.execution_id))}
    return build_event(notice, namespace=namespace, involved=on_pod)


def coalesced(
    notices: list[Notice], *, swarm: str, namespace: str, swarm_uid: str | None
) -> list[dict[str, Any]]:
    """The Events of a batch of notices: on the Swarm, one Event per reason (``count`` = how many
    notices, the message naming each as far as 1 KiB allows); on each attempt's Pod, its own Event.
    A burst of failures then costs the API server one Swarm Event per kind of step, not one per
    attempt and step. Groups keep the order of their first notice, each group's Pod Events after it.
    """
    groups: dict[tuple[str, bool], list[Notice]] = {}
    for notice in notices:
        groups.setdefault((notice.reason, notice.warning), []).append(notice)
    out: list[dict[str, Any]] = []
    for (reason, warning), group in groups.items():
        if len(group) == 1:
            out.extend(events_for(group[0], swarm=swarm, namespace=namespace, swarm_uid=swarm_uid))
            continue
        event = build_event(
            Notice(reason, _joined(group), warning=warning),
            namespace=namespace,
            involved=_on_swarm(swarm, swarm_uid),
        )
        event["count"] = len(group)
        out.append(event)
        out.extend(_on_pod(notice, namespace) for notice in group if notice.execution_id)
    return out


def _joined(group: list[Notice], limit: int = 1024) -> str:
    text = f"{len(group)} attempts: "
    for i, notice in enumerate(group):
        more = f" ... and {len(group) - i} more"
        part = ("; " if i else "") + notice.message
        if len(text) + len(part) + len(more) > limit:
            return text + more
        text += part
    return text


_TYPES = {
    "fence": ("Fenced", True),
    "recovery": ("Decided", False),
    "outcome": ("RestoreReported", False),
    # A launch waiting on something outside the operator (its detail names a Secret or the API
    # server's refusal, never a credential's content).
    "launch_blocked": ("LaunchBlocked", True),
    # A replacement refused its restore (its detail is the reason); the seat waits for a relaunch.
    "restore_refused": ("RestoreRefused", True),
    # The operator relaunched a refused replacement as the seat's next generation.
    "relaunch": ("Relaunched", False),
}


def notice_of_held(
    execution_id: str, seat: str, step: str, call: str | None, *, resumed: bool, epoch: int
) -> Notice:
    """A held step (``RecoveryHeld``, a warning) or its resume (``RecoveryResumed``); names the step only."""
    of = f"seat {seat} attempt {execution_id}: "
    via = f" (call {call})" if call else ""
    if resumed:
        text = f"{of}held step {step}{via} resumed with the operator's observation"
        return Notice("RecoveryResumed", text + f" (controller epoch {epoch})", execution_id=execution_id)
    text = (
        f"{of}recovery held at step {step}{via}: its outcome is unknown; the operator answers "
        f"applied or not_applied (controller epoch {epoch})"
    )
    return Notice("RecoveryHeld", text, execution_id=execution_id, warning=True)


def notice_of_telemetry(event_type: str, execution_id: str, seat: str, detail: str, epoch: int) -> Notice:
    """A Notice from one entry of the recovery core's telemetry stream."""
    reason, warning = _TYPES.get(event_type, (event_type.capitalize(), False))
    text = f"seat {seat} attempt {execution_id}: {detail}".rstrip(": ") + f" (controller epoch {epoch})"
    return Notice(reason=reason, message=text, execution_id=execution_id, warning=warning)
