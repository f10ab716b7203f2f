"""kstatus's verdict on a custom resource, ported from kubernetes-sigs/cli-utils.

The rules of ``pkg/kstatus/status`` (``Compute``, ``checkGenericProperties``,
``checkGeneration``, ``checkReadyCondition``; read at commit 5895ad6c) for a
kind with no built-in rules, which is what Flux's health checks, Argo CD's
fallback and ``kubectl wait``-style tools compute for a Swarm:

1. a ``metadata.deletionTimestamp`` is ``Terminating``;
2. a ``status.observedGeneration`` other than ``metadata.generation`` is
   ``InProgress``;
3. in list order, ``Reconciling=True`` is ``InProgress`` and ``Stalled=True``
   is ``Failed``;
4. ``Ready=True`` is ``Current``; ``Ready=False`` or ``Unknown`` is ``InProgress``;
5. otherwise ``Current``.

Only the tests use it: it checks that the conditions the operator writes read
the way these tools expect, without taking Go into the test run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def status_of(obj: Mapping[str, Any] | None) -> str:
    obj = obj or {}
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    if meta.get("deletionTimestamp"):
        return "Terminating"
    generation = meta.get("generation")
    if (
        generation is not None
        and "observedGeneration" in status
        and status["observedGeneration"] != generation
    ):
        return "InProgress"
    conds = [c for c in status.get("conditions") or [] if isinstance(c, Mapping)]
    for c in conds:
        if c.get("type") == "Reconciling" and c.get("status") == "True":
            return "InProgress"
        if c.get("type") == "Stalled" and c.get("status") == "True":
            return "Failed"
    for c in conds:
        if c.get("type") != "Ready":
            continue
        if c.get("status") == "True":
            return "Current"
        if c.get("status") in ("False", "Unknown"):
            return "InProgress"
    return "Current"
