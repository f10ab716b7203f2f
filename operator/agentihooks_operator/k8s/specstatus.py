"""What the ``validate`` handler says about a Swarm's spec: its conditions and the Event of an invalid one.

An invalid spec is a ``SpecValid=False``, ``Ready=False`` and ``Stalled=True``
condition (kstatus reads Stalled as Failed: nothing happens until someone fixes
the spec) and one Warning Event on the Swarm naming the Swarm and what is wrong,
posted once per distinct message by this process. A valid spec is
``SpecValid=True``, ``Stalled=False``, the ``CheckpointVolume`` finding, and
``Ready=Unknown`` until the first recovery pass of a replica says more.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from .building.rootvolume import CONDITION as ROOT_CONDITION
from .client import KubeClient
from .conditions import READY, STALLED, Verdict
from .crd import API_VERSION, KIND
from .errors import ApiError
from .events import Notice, build_event

log = logging.getLogger(__name__)
SPEC_VALID = "SpecValid"
INVALID = "InvalidSpec"


def invalid(message: str) -> list[Verdict]:
    return [
        Verdict(SPEC_VALID, "False", INVALID, message),
        Verdict(READY, "False", INVALID, f"the spec is invalid: {message}"),
        Verdict(STALLED, "True", INVALID, f"nothing is recovered until the spec is fixed: {message}"),
    ]


def valid(unheld: str | None, generation: int | None) -> list[Verdict]:
    at = f" (generation {generation})" if generation is not None else ""
    return [
        Verdict(SPEC_VALID, "True", "Valid", "the spec is valid"),
        Verdict(STALLED, "False", "Valid", "the spec is valid"),
        Verdict(
            ROOT_CONDITION,
            "False" if unheld else "True",
            "NoLastingVolume" if unheld else "Held",
            unheld or "the checkpoint store outlives the worker Pods",
        ),
        Verdict(READY, "Unknown", "Reconciling", f"waiting for the first recovery pass of this spec{at}"),
    ]


def post_invalid(
    memo: Any, kube: KubeClient, namespace: str, name: str, *, meta: Mapping[str, Any] | None, message: str
) -> bool:
    """One Warning ``InvalidSpec`` Event on the Swarm per distinct message; ``False`` if not posted."""
    posted: dict[tuple[str, str], str] = memo.setdefault("invalid_posted", {})
    key = (namespace, name)
    if posted.get(key) == message:
        return False
    involved: dict[str, Any] = {"apiVersion": API_VERSION, "kind": KIND, "name": name}
    uid = (meta or {}).get("uid")
    if uid:
        involved["uid"] = uid
    notice = Notice(INVALID, f"swarm {namespace}/{name}: the spec is invalid: {message}", warning=True)
    try:
        kube.create("events", namespace, build_event(notice, namespace=namespace, involved=involved))
    except ApiError as e:  # the condition says it too; an Event is a courtesy
        log.warning("could not post the InvalidSpec event of swarm %s/%s: %s", namespace, name, e)
        return False
    posted[key] = message
    return True
