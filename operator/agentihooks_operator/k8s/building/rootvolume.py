"""What holds a Swarm's checkpoint root on its worker Pods: a volume that outlives the Pod, or nothing.

A Swarm with ``checkpointStore.root`` and no ``remote`` tells its workers to keep checkpoints in that
folder. The worker's root filesystem is read-only and its writable folders are emptyDirs, so unless a
volume that outlives the Pod is mounted there, captures fail (nothing mounted) or land in a folder
that dies with the very Pod a replacement would restore from (an emptyDir). The operator mounts the
claim named in ``checkpointStore.claim`` itself; a ``podTemplate`` may mount its own claim at (or
above) the root instead. Anything else is refused before a Pod is created: :func:`root_refusal` names
what is wrong and how to fix it, and is applied both to every launch (:class:`LaunchBlocked`: the
seat's card and a ``LaunchBlocked`` Event) and when the Swarm is written (the
``CheckpointVolume`` condition), so the author learns it before any seat fails.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from ...swarm import SwarmSpec
from .pods import CONTAINER, Execution, Owner, build_worker_pod

#: Volume kinds that outlive the Pod and may hold a checkpoint root.
LASTING = ("persistentVolumeClaim",)
#: The condition the Swarm's status carries about it.
CONDITION = "CheckpointVolume"
FIX = (
    "name a PersistentVolumeClaim in checkpointStore.claim, mount one there with podTemplate, "
    "or set checkpointStore.remote"
)


def _covers(mount_path: str, root: str) -> bool:
    mount, root = posixpath.normpath(mount_path), posixpath.normpath(root)
    return root == mount or root.startswith(mount.rstrip("/") + "/")


def _kind(volume: Mapping[str, Any]) -> str:
    return next((k for k in volume if k != "name"), "unknown")


def root_refusal(spec: SwarmSpec, pod: Mapping[str, Any]) -> str | None:
    """Why the worker Pod ``pod`` cannot hold ``spec``'s checkpoint root, or ``None`` when it can
    (or when the Swarm keeps no root of its own: no root, or ``remote``)."""
    store = spec.checkpoint_store
    root = store.root
    if root is None or store.remote:
        return None
    containers = (pod.get("spec") or {}).get("containers") or []
    worker = next((c for c in containers if c.get("name") == CONTAINER), None)
    declared = (worker or {}).get("volumeMounts") or []
    mounts = [m for m in declared if _covers(str(m.get("mountPath", "")), root)]
    if not mounts:
        return (
            f"checkpointStore.root {root} is backed by no volume on the worker Pods (their root filesystem "
            f"is read-only, and a container's own files die with it): {FIX}"
        )
    mount = max(mounts, key=lambda m: len(posixpath.normpath(str(m["mountPath"]))))  # the innermost wins
    volumes = {v.get("name"): v for v in (pod.get("spec") or {}).get("volumes") or []}
    volume = mount.get("name")
    kind = _kind(volumes.get(volume, {}))
    if kind in ("emptyDir", "ephemeral"):
        return (
            f"checkpointStore.root {root} is on the {kind} volume {volume}, which dies with the Pod "
            f"a replacement would restore from: {FIX}"
        )
    if kind not in LASTING:
        return f"checkpointStore.root {root} is on a {kind} volume, which cannot hold checkpoints: {FIX}"
    if mount.get("readOnly"):
        return f"checkpointStore.root {root} is mounted read-only (volume {volume}): workers write there"
    return None


def probe_refusal(spec: SwarmSpec, namespace: str, name: str) -> str | None:
    """:func:`root_refusal` for the Pod the Swarm's first attempt would get (at admission time)."""
    owner = Owner(name=name, namespace=namespace, uid="probe", controller="probe")
    seat = spec.seats[0]
    ex = Execution(
        execution_id="exe-" + "0" * 32,
        generation=1,
        seat=seat.name,
        task_id=seat.task.id,
        task_generation=1,
        grant_id="probe",
        controller_epoch=0,
    )
    pod, _ = build_worker_pod(spec, owner, ex)
    return root_refusal(spec, pod)
