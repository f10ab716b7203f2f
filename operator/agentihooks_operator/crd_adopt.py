"""``agentihooks-operator --adopt-crd FILE``: the chart's hook that takes over a Swarm CRD it does not own.

The chart installs and upgrades the Swarm CRD as a template (``crds.enabled``). Earlier charts shipped
it under ``crds/``, which Helm installs once and never touches again, and an uninstalled release with
``crds.keep`` leaves its CRD behind: either way the CRD exists but is not the release's, and Helm
refuses to upgrade an object another owner holds ("invalid ownership metadata") before any hook could
fix that. So the chart renders the CRD only when it is absent or already the release's; otherwise this
command runs as a pre-install/pre-upgrade hook Job and:

1. applies the chart's CRD (server-side apply under Helm's own field manager, ``helm``, so a later
   ``helm upgrade`` that changes the schema owns the same fields and never meets a conflict);
2. marks it as the release's (``app.kubernetes.io/managed-by: Helm`` and the two ``meta.helm.sh``
   annotations), plus ``helm.sh/resource-policy: keep`` when ``--keep``.

The next upgrade renders the CRD as the release's own. Only the one CRD the file names is read or
written (the hook's ClusterRole names it). Swarms are never touched: a CRD update keeps its objects.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import yaml

from .k8s.client import KubeClient
from .k8s.errors import ApiError

log = logging.getLogger(__name__)

CRDS = "apiextensions.k8s.io/v1/customresourcedefinitions"
#: The field manager Helm's server-side apply uses: the adopted fields are then Helm's own.
FIELD_MANAGER = "helm"


class AdoptError(RuntimeError):
    """The file is not a CustomResourceDefinition, or the API server refused it; the message says which."""


def owned(release: str, namespace: str, keep: bool) -> dict[str, dict[str, str]]:
    """The ownership metadata Helm checks before it upgrades an existing object."""
    annotations = {"meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": namespace}
    if keep:
        annotations["helm.sh/resource-policy"] = "keep"
    return {"labels": {"app.kubernetes.io/managed-by": "Helm"}, "annotations": annotations}


def read_crd(path: Path) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise AdoptError(f"cannot read the CRD file {path}: {e}") from e
    if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
        raise AdoptError(f"{path} is not a CustomResourceDefinition")
    name = (doc.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        raise AdoptError(f"{path}: the CRD has no metadata.name")
    return doc


def adopt(
    kube: KubeClient, crd: dict[str, Any], *, release: str, namespace: str, keep: bool
) -> dict[str, Any]:
    """Apply ``crd`` as the release's; returns the CRD as stored."""
    name = crd["metadata"]["name"]
    mine = owned(release, namespace, keep)
    body = {
        "apiVersion": crd["apiVersion"],
        "kind": crd["kind"],
        "metadata": {
            "name": name,
            "labels": {**(crd["metadata"].get("labels") or {}), **mine["labels"]},
            "annotations": {**(crd["metadata"].get("annotations") or {}), **mine["annotations"]},
        },
        "spec": crd["spec"],
    }
    before = kube.get(CRDS, None, name)
    was = ((before or {}).get("metadata") or {}).get("annotations") or {}
    try:
        stored = kube.apply(CRDS, None, name, body, manager=FIELD_MANAGER, force=True)
    except ApiError as e:
        raise AdoptError(f"the API server refused the CRD {name}: {e}") from e
    log.info(
        "CRD %s %s and now belongs to release %s/%s (it belonged to %s)",
        name,
        "updated" if before is not None else "created",
        namespace,
        release,
        was.get("meta.helm.sh/release-name") or "no release: installed from a chart's crds/ or by hand",
    )
    return stored


def run(path: str, *, release: str, namespace: str, keep: bool) -> int:
    """The hook's job; the exit status (1 with one line naming what went wrong)."""
    from .k8s.errors import NoCredentials

    try:
        crd = read_crd(Path(path))
        kube = KubeClient.from_environment(agent="agentihooks-operator/adopt-crd")
        try:
            adopt(kube, crd, release=release, namespace=namespace, keep=keep)
        finally:
            kube.close()
    except (AdoptError, ApiError, NoCredentials) as e:
        log.error("the Swarm CRD was not taken over: %s", e)
        return 1
    return 0
