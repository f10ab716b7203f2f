"""A worker Pod asked to stop is held, not fenced, until its containers have ended.

A drain, an eviction through the Eviction API or a ``kubectl delete`` gives the
Pod a grace period: the kubelet sends SIGTERM, the worker stops its harness,
takes its final capture and reports the watermark it reached, then exits. If
the controller fenced the attempt the moment the Pod was marked
(``DisruptionTarget``, ``deletionTimestamp``), two things would go wrong: the
replacement would start while the old worker still runs and writes, and the
fence would be written before the final capture's report, so it would name a
lost tail that was not lost and the replacement would restore an older
checkpoint.

So an attempt whose Pod is marked for a planned stop, still has a running
container and is within its deadline is ``stopping``: alive to the recovery
core, observed again every pass. The deadline is the ``deletionTimestamp``
(the end of the grace period the API server set), or, for a Pod marked but
not yet deleted, the mark's time plus the Pod's
``terminationGracePeriodSeconds``; :data:`STOP_SLACK_S` more is allowed for the
kubelet's SIGKILL and its last status report. A Pod whose node is lost is
never held: nobody is left to stop its containers.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

#: Seconds past the grace period a stopping Pod is still held (the kubelet kills and reports).
STOP_SLACK_S = 15.0
#: Kubernetes' default ``terminationGracePeriodSeconds``.
DEFAULT_GRACE_S = 30.0


def parse_time(value: Any) -> datetime | None:
    """A Kubernetes timestamp (``2026-12-02T10:00:00Z``) as an aware datetime; ``None`` if unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _running(pod: Mapping[str, Any]) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return any("running" in (cs.get("state") or {}) for cs in statuses)


def _marked_at(pod: Mapping[str, Any]) -> datetime | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "DisruptionTarget" and cond.get("status") == "True":
            return parse_time(cond.get("lastTransitionTime"))
    return None


def deadline(pod: Mapping[str, Any]) -> datetime | None:
    """When the Pod's containers must have ended (``None``: no stop was asked for, or its time is
    unknown)."""
    meta = pod.get("metadata") or {}
    deleting = parse_time(meta.get("deletionTimestamp"))
    if deleting is not None:
        return deleting
    marked = _marked_at(pod)
    if marked is None:
        return None
    grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    seconds = (
        float(grace) if isinstance(grace, int | float) and not isinstance(grace, bool) else DEFAULT_GRACE_S
    )
    return marked + timedelta(seconds=seconds)


def stopping(pod: Mapping[str, Any], now: datetime) -> bool:
    """Whether the Pod is in its grace period with a container still running (see the module doc)."""
    if not _running(pod):
        return False
    end = deadline(pod)
    return end is not None and now < end + timedelta(seconds=STOP_SLACK_S)
