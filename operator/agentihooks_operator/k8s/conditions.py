"""The Swarm's conditions, in the standard shape, and the one way they are written.

Several writers own conditions on one Swarm: the ``validate`` handler
(``SpecValid``, ``CheckpointVolume``, ``Stalled``), every replica's recovery
loop (``Ready``), each replica possibly from a stale view. A merge patch
replaces the whole list, so each write here reads the Swarm, swaps in its own
conditions, keeps the others and patches with the ``resourceVersion`` it read:
a write that raced another is refused (409) and done again from a fresh read,
so no writer ever drops or reverts a condition it does not own.

Each condition carries ``type``, ``status``, ``reason``, ``message``,
``lastTransitionTime`` (moved only when the status changes) and
``observedGeneration``, as ``metav1.Condition`` does; that is what kstatus,
Argo CD and Flux read. ``Ready`` says whether the Swarm is looked after: False
while its spec is invalid, Redis cannot be reached, a launch is blocked, the
operator's RBAC refuses a call, or no replica has held its lease for longer than
a lease TTL.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .client import KubeClient
from .crd import API_VERSION, PLURAL
from .errors import ApiError

log = logging.getLogger(__name__)
SWARMS = f"{API_VERSION}/{PLURAL}"
READY = "Ready"
STALLED = "Stalled"
#: Attempts at a write that keeps racing other writers before giving up (the next pass tries again).
TRIES = 5


@dataclass(frozen=True)
class Verdict:
    """One condition's content, before the shape (times, generation) is put on it."""

    type: str
    status: str  # "True", "False" or "Unknown"
    reason: str
    message: str


def ready(status: bool | None, reason: str, message: str) -> Verdict:
    return Verdict(READY, {True: "True", False: "False", None: "Unknown"}[status], reason, message)


def of_pass(blocked: Iterable[tuple[str, str]], *, paused: bool) -> Verdict:
    """``Ready`` from a pass this replica ran as the lease holder; ``blocked`` is (seat, why) per
    seat whose launch cannot be made. The message holds no counts, so a quiet Swarm writes nothing."""
    stuck = sorted(dict(blocked).items())
    if stuck:
        named = "; ".join(f"seat {seat}: {why}" for seat, why in stuck[:3])
        more = f" (and {len(stuck) - 3} more)" if len(stuck) > 3 else ""
        return ready(False, "LaunchBlocked", f"a launch is blocked: {named}{more}")
    if paused:
        return ready(True, "Paused", "automation is paused: failed seats wait for a decision")
    return ready(True, "Reconciled", "an operator replica holds the lease and recovers the seats")


def now_stamp() -> str:
    return datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def shaped(verdict: Verdict, generation: int | None, held: Mapping[str, Any] | None) -> dict[str, Any]:
    """The condition as written: its transition time kept from ``held`` while the status is the same."""
    cond: dict[str, Any] = {
        "type": verdict.type,
        "status": verdict.status,
        "reason": verdict.reason,
        "message": verdict.message,
        "lastTransitionTime": now_stamp(),
    }
    if generation is not None:
        cond["observedGeneration"] = generation
    if held and held.get("status") == verdict.status and held.get("lastTransitionTime"):
        cond["lastTransitionTime"] = held["lastTransitionTime"]
    return cond


def same(held: Mapping[str, Any] | None, verdict: Verdict, generation: int | None) -> bool:
    """Whether ``held`` already says ``verdict`` for this generation (nothing to write)."""
    if not held:
        return False
    return (
        held.get("status") == verdict.status
        and held.get("reason") == verdict.reason
        and held.get("message") == verdict.message
        and (generation is None or held.get("observedGeneration") == generation)
    )


def held_in(obj: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The conditions an object's status holds, by type."""
    conds = ((obj or {}).get("status") or {}).get("conditions") or []
    return {str(c.get("type")): dict(c) for c in conds if isinstance(c, Mapping)}


def put(
    kube: KubeClient,
    namespace: str,
    name: str,
    verdicts: list[Verdict],
    *,
    generation: int | None,
    only_over: Mapping[str, set[str] | None] | None = None,
    observed: bool = False,
) -> bool:
    """Write ``verdicts`` unless the Swarm already says them; ``False`` when nothing was written.

    ``observed`` also sets ``status.observedGeneration``: the invalid spec was observed (no pass
    runs to say so), which kstatus needs to read ``Stalled`` as Failed after an edit.

    ``only_over`` maps a type to the reasons it may replace (``None``: only where it is absent):
    the validate handler's ``Ready=Unknown`` never overwrites what a pass wrote. Raises
    :class:`ApiError` when the API refuses (the caller retries later); a Swarm gone is no write.
    """
    for _ in range(TRIES):
        swarm = kube.get(SWARMS, namespace, name)
        if swarm is None:
            return False
        held = held_in(swarm)
        mine = [v for v in verdicts if _may_replace(held.get(v.type), v, generation, only_over)]
        todo = [v for v in mine if not same(held.get(v.type), v, generation)]
        if not todo:
            return False
        written = {v.type: shaped(v, generation, held.get(v.type)) for v in todo}
        conditions = [written.pop(t, c) for t, c in held.items()] + list(written.values())
        version = (swarm.get("metadata") or {}).get("resourceVersion")
        status: dict[str, Any] = {"conditions": conditions}
        if observed and generation is not None:
            status["observedGeneration"] = generation
        body = {"metadata": {"resourceVersion": version}, "status": status}
        try:
            kube.patch(SWARMS, namespace, name, body, sub="status")
        except ApiError as e:
            if e.status == 409:  # another writer came between the read and the patch: read again
                continue
            if e.status == 404:
                return False
            raise
        return True
    log.info(
        "conditions of swarm %s/%s kept changing under this write; the next pass writes them", namespace, name
    )
    return False


def _may_replace(
    held: Mapping[str, Any] | None,
    verdict: Verdict,
    generation: int | None,
    only_over: Mapping[str, set[str] | None] | None,
) -> bool:
    """Never over a condition computed for a newer spec (a pass that read the spec before an edit
    made it invalid does not overwrite ``InvalidSpec``); then as ``only_over`` says."""
    newer = (held or {}).get("observedGeneration")
    if isinstance(newer, int) and generation is not None and generation < newer:
        return False
    if not only_over or verdict.type not in only_over:
        return True
    reasons = only_over[verdict.type]
    if held is None:
        return True
    return reasons is not None and held.get("reason") in reasons
