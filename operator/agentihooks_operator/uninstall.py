"""``agentihooks-operator --remove-finalizers``: what the chart's pre-delete hook runs on ``helm uninstall``.

kopf keeps the finalizer ``swarm.agentihooks.io/operator`` on every Swarm it handles (the recovery
daemon needs it to stop cleanly when a Swarm is deleted). Once the operator is uninstalled nothing
removes it, so deleting a Swarm, its namespace or the CRD afterwards would wait forever. This command,
run by the chart's pre-delete hook Job while the release's RBAC still exists:

1. stops the operator (``--stop-deployment NAMESPACE/NAME``): scales its Deployment to 0 through the
   ``scale`` subresource and waits until the Deployment's Pods are gone. While an operator runs, kopf
   puts the finalizer back on the next event of a Swarm that lacks it, and removing the finalizer is
   itself such an event: removing it first would be undone at once;
2. removes that one finalizer from every Swarm of the watched namespaces (``AGENTIHOOKS_NAMESPACES``,
   as the operator reads it; empty: every namespace), sending the object's ``resourceVersion`` so a
   concurrent change is re-read rather than overwritten. Other finalizers stay.

Nothing else of a Swarm changes: its spec, status and worker Pods stay, and so does the Redis state. A
later install adopts the Swarms again (kopf adds its finalizer back when it resumes them).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .k8s.client import KubeClient
from .k8s.crd import GROUP, PLURAL, VERSION
from .k8s.errors import ApiError

log = logging.getLogger(__name__)

#: kopf's finalizer on Swarms (``settings.persistence.finalizer`` in :mod:`.k8s.handlers`).
FINALIZER = "swarm.agentihooks.io/operator"
SWARMS = f"{GROUP}/{VERSION}/{PLURAL}"
DEPLOYMENTS = "apps/v1/deployments"
PODS = "pods"


class UninstallError(Exception):
    """The hook could not do its job; the message says what to do instead."""


@dataclass
class Report:
    """What one run did, for the log and the tests."""

    stopped: str | None = None
    #: ``namespace/name`` of every Swarm whose finalizer was removed.
    released: list[str] = field(default_factory=list)
    #: Swarms that had no finalizer of the operator's.
    untouched: int = 0


def parse_target(value: str) -> tuple[str, str]:
    """``NAMESPACE/NAME`` of the operator's Deployment."""
    namespace, sep, name = value.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise UninstallError(f"--stop-deployment takes NAMESPACE/NAME, not {value!r}")
    return namespace, name


def stop_deployment(
    kube: KubeClient,
    namespace: str,
    name: str,
    *,
    wait_seconds: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> bool:
    """Scale the operator's Deployment to 0 and wait for its Pods to go; ``False`` when the wait timed
    out (Pods left Terminating, e.g. on a lost node, cannot reach the API to re-add anything for long).
    A Deployment that does not exist (already removed) counts as stopped."""
    deployment = kube.get(DEPLOYMENTS, namespace, name)
    if deployment is None:
        log.info("Deployment %s/%s does not exist: no operator to stop", namespace, name)
        return True
    selector = ((deployment.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    if not selector:
        raise UninstallError(f"Deployment {namespace}/{name} has no matchLabels selector")
    kube.patch(DEPLOYMENTS, namespace, name, {"spec": {"replicas": 0}}, sub="scale")
    log.info("scaled Deployment %s/%s to 0; waiting for its Pods to stop", namespace, name)
    deadline = clock() + wait_seconds
    while True:
        left = [p["metadata"]["name"] for p in kube.list(PODS, namespace, labels=selector)]
        if not left:
            log.info("the operator's Pods are gone")
            return True
        if clock() >= deadline:
            log.warning(
                "after %.0f s these operator Pods still exist: %s; removing the finalizers anyway",
                wait_seconds,
                ", ".join(sorted(left)),
            )
            return False
        sleep(1.0)


def release_swarm(kube: KubeClient, swarm: dict[str, Any], *, tries: int = 5) -> bool:
    """Remove the operator's finalizer from one Swarm; ``False`` when it had none (or is gone)."""
    meta = swarm["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    for _ in range(tries):
        finalizers = list(meta.get("finalizers") or [])
        if FINALIZER not in finalizers:
            return False
        body = {
            "metadata": {
                "resourceVersion": meta["resourceVersion"],
                "finalizers": [f for f in finalizers if f != FINALIZER],
            }
        }
        try:
            kube.patch(SWARMS, namespace, name, body)
            return True
        except ApiError as e:
            if e.status == 404:
                return False
            if e.status != 409:
                raise
        current = kube.get(SWARMS, namespace, name)
        if current is None:
            return False
        meta = current["metadata"]
    raise UninstallError(f"Swarm {namespace}/{name} kept changing; its finalizer is still there")


def release_swarms(kube: KubeClient, namespaces: list[str]) -> Report:
    """Remove the operator's finalizer from every Swarm of ``namespaces`` (all when empty)."""
    report = Report()
    scopes: list[str | None] = [*namespaces] if namespaces else [None]
    swarms: list[dict[str, Any]] = []
    for namespace in scopes:
        swarms += kube.list(SWARMS, namespace)
    for swarm in swarms:
        where = f"{swarm['metadata']['namespace']}/{swarm['metadata']['name']}"
        if release_swarm(kube, swarm):
            log.info("Swarm %s: finalizer %s removed", where, FINALIZER)
            report.released.append(where)
        else:
            report.untouched += 1
    return report


def run(
    kube: KubeClient,
    namespaces: list[str],
    *,
    stop: str | None,
    wait_seconds: float = 120.0,
    sleep: Callable[[float], None] = time.sleep,
) -> Report:
    """The hook's whole job: stop the operator (when told which Deployment), then release the Swarms."""
    report = Report()
    if stop is not None:
        namespace, name = parse_target(stop)
        stop_deployment(kube, namespace, name, wait_seconds=wait_seconds, sleep=sleep)
        report.stopped = stop
    done = release_swarms(kube, namespaces)
    report.released, report.untouched = done.released, done.untouched
    scope = ", ".join(namespaces) if namespaces else "every namespace"
    log.info(
        "finalizers removed from %d Swarm(s) in %s (%d had none)",
        len(report.released),
        scope,
        report.untouched,
    )
    return report
