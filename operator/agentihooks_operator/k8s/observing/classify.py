"""Turn a worker Pod's status document into one attempt state and, for a lost attempt, one reason.

Pure functions only: no API calls, no clock of its own. A Pod asked to stop and still
within its grace period is ``stopping`` (held, not fenced: :mod:`.drain`). The recovery pass feeds
each current attempt's Pod (``None`` when it is gone), the Pod's Node when it
is known, and "now"; the image-pull grace is applied separately by
:func:`apply_pull_grace` because it needs the time the attempt first showed a
pull failure, which lives in Redis. Precedence follows the original swarm v2
controller: ``oom_killed`` > ``evicted`` > ``node_lost`` > ``image_pull`` >
``application_exit``. The mapping is documented in ``docs/classification.md``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from . import drain

State = Literal["pending", "running", "stopping", "succeeded", "failed", "gone"]
Reason = Literal["oom_killed", "evicted", "node_lost", "image_pull", "application_exit"]

PULL_FAILURES = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})
#: ``DisruptionTarget`` condition reasons and the failure each one means.
DISRUPTIONS: Mapping[str, Reason] = {
    "EvictionByEvictionAPI": "evicted",
    "PreemptionByScheduler": "evicted",
    "TerminationByKubelet": "evicted",
    "DeletionByTaintManager": "node_lost",
    # kube-controller-manager's Pod GC: the Pod's node is gone (orphaned) or out of service
    "DeletionByPodGC": "node_lost",
}
#: How long a Node may stay NotReady/Unknown before its Pods count as lost.
DEFAULT_NODE_LOST_AFTER_S = 40.0


@dataclass(frozen=True)
class Verdict:
    """What one Pod says about its attempt.

    ``stopping`` (a planned stop within its grace period, :mod:`.drain`) carries the reason the
    attempt will be fenced with once its containers have ended."""

    state: State
    reason: Reason | None = None
    #: A container is waiting on an image pull failure right now (grace not applied yet).
    pull_failure: bool = False


def _statuses(pod: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    status = pod.get("status") or {}
    for key in ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses"):
        yield from status.get(key) or []


def _terminations(pod: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for cs in _statuses(pod):
        for key in ("state", "lastState"):
            term = (cs.get(key) or {}).get("terminated")
            if term:
                yield term


def _oom_killed(pod: Mapping[str, Any]) -> bool:
    return any(t.get("reason") == "OOMKilled" for t in _terminations(pod))


def _exited(term: Mapping[str, Any]) -> bool:
    """Whether a ``terminated`` state is an exit rather than success.

    As in the original: only an explicit ``exitCode`` of 0 is success; a
    missing, null or unreadable one counts as an exit.
    """
    code = term.get("exitCode")
    return not (isinstance(code, int) and not isinstance(code, bool) and code == 0)


def _nonzero_exit(pod: Mapping[str, Any]) -> bool:
    for cs in _statuses(pod):
        term = (cs.get("state") or {}).get("terminated")
        if isinstance(term, Mapping) and _exited(term):
            return True
    return False


def nothing_runs(pod: Mapping[str, Any] | None) -> bool:
    """Whether the kubelet reports that no container of ``pod`` runs: every container (init ones too)
    terminated, or waiting (an image it cannot pull: a container that never started does not run; with
    ``restartPolicy: Never`` none goes back from running to waiting). Only meaningful from a kubelet that
    reports: a lost node's Pod is never proven (its last status may be stale), nor a vanished Pod."""
    if pod is None:
        return False
    statuses = list(_statuses(pod))
    if not statuses:
        return False
    return all("running" not in (cs.get("state") or {}) and (cs.get("state") or {}) for cs in statuses)


def _pull_failure(pod: Mapping[str, Any]) -> bool:
    for cs in _statuses(pod):
        waiting = (cs.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason") in PULL_FAILURES:
            return True
    return False


def _conditions(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((obj.get("status") or {}).get("conditions") or [])


def _disruption(pod: Mapping[str, Any]) -> Reason | None:
    for cond in _conditions(pod):
        if cond.get("type") == "DisruptionTarget" and cond.get("status") == "True":
            return DISRUPTIONS.get(str(cond.get("reason")), "evicted")
    return None


_parse_time = drain.parse_time


def node_lost(node: Mapping[str, Any] | None, *, node_known: bool, now: datetime, after_s: float) -> bool:
    """True when the Pod's node is gone, or NotReady/Unknown for at least ``after_s`` seconds.

    ``node_known`` says the caller could list nodes at all; without that, a
    missing node proves nothing.
    """
    if node is None:
        return node_known
    for cond in _conditions(node):
        if cond.get("type") != "Ready":
            continue
        if cond.get("status") == "True":
            return False
        since = _parse_time(cond.get("lastTransitionTime"))
        return since is None or (now - since).total_seconds() >= after_s
    return False


def _pod_says_node_lost(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    if status.get("reason") == "NodeLost" or status.get("phase") == "Unknown":
        return True
    return any(
        cond.get("type") == "NodeNotReady" or cond.get("reason") == "NodeNotReady"
        for cond in _conditions(pod)
    )


def _deleted_while_running(pod: Mapping[str, Any]) -> bool:
    """Someone deleted the Pod (no eviction, no taint) before its containers had ended.

    Its containers are then stopped whatever they exit with: a worker that
    captures and exits 0 on SIGTERM did not finish its task. Such an attempt is
    lost like a Pod that vanished. A container that had finished before the
    deletion was asked for (``deletionTimestamp`` less the grace period) keeps
    its own outcome.
    """
    meta = pod.get("metadata") or {}
    deadline = _parse_time(meta.get("deletionTimestamp"))
    if deadline is None:
        return False
    asked = deadline - timedelta(seconds=float(meta.get("deletionGracePeriodSeconds") or 0))
    ended: list[datetime | None] = []
    for cs in _statuses(pod):
        state = cs.get("state") or {}
        if "terminated" not in state:
            return True  # still running (or waiting) when the deletion was asked for
        ended.append(_parse_time((state.get("terminated") or {}).get("finishedAt")))
    if not ended or any(t is None for t in ended):
        return True
    return max(t for t in ended if t is not None) >= asked


def classify(
    pod: Mapping[str, Any] | None,
    *,
    node: Mapping[str, Any] | None = None,
    node_known: bool = False,
    now: datetime | None = None,
    node_lost_after_s: float = DEFAULT_NODE_LOST_AFTER_S,
) -> Verdict:
    """Classify one attempt from its Pod (``None``: the Pod no longer exists)."""
    if pod is None:
        return Verdict("gone")
    now = now or datetime.now(tz=UTC)
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    if _oom_killed(pod):
        return Verdict("failed", "oom_killed")
    if status.get("reason") == "Evicted":
        return Verdict("failed", "evicted")
    disruption = _disruption(pod)
    on_node = bool((pod.get("spec") or {}).get("nodeName"))
    lost_node = (
        on_node
        and phase in {"Pending", "Running"}
        and node_lost(node, node_known=node_known, now=now, after_s=node_lost_after_s)
    )
    if disruption == "evicted":
        return Verdict("stopping" if not lost_node and drain.stopping(pod, now) else "failed", "evicted")
    if disruption == "node_lost" or _pod_says_node_lost(pod) or lost_node:
        return Verdict("failed", "node_lost")
    if _deleted_while_running(pod):
        return Verdict("stopping" if drain.stopping(pod, now) else "failed", "node_lost")
    if _pull_failure(pod):
        return Verdict("pending", pull_failure=True)
    if phase == "Failed" or _nonzero_exit(pod):
        return Verdict("failed", "application_exit")
    if phase == "Succeeded":
        return Verdict("succeeded")
    if phase == "Running":
        return Verdict("running")
    return Verdict("pending")


def apply_pull_grace(verdict: Verdict, *, first_seen_ms: int | None, now_ms: int, grace_ms: int) -> Verdict:
    """Turn a pull failure held for ``grace_ms`` (since ``first_seen_ms``) into ``image_pull``."""
    if not verdict.pull_failure or first_seen_ms is None:
        return verdict
    if now_ms - first_seen_ms >= grace_ms:
        return Verdict("failed", "image_pull", pull_failure=True)
    return verdict
