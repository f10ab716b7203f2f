"""Pure builders for one execution's Kubernetes objects: the Pod and its Secret (credential, launch record).

Each builder takes plain values and returns a dict ready to POST (in the
style of dask-kubernetes' ``build_*_spec``), so names, labels and mounts can be
unit-tested without an API server. Names and labels follow the original
swarm v2 controller: Pod ``swarm-<execution_id>`` with its worker container
``agent``, the launch record at ``/var/run/swarm/launch/launch.json``, labels
and annotations under ``swarm.agentihooks.io/``. The original mounts that
file from a ConfigMap ``swarm-<execution_id>-launch``; here it is a key of
the attempt's one Secret ``swarm-<execution_id>-credential`` (beside the
worker's token), so a launch is two creates, not three. Attempts launched by
the release before keep their ConfigMap until they are retired
(:func:`launch_configmap_name`). The ``controller-owner`` label is the original's
``agentihooks-swarm-<slug>`` (the same for every replica); which operator
process launched the Pod is the ``operator-id`` annotation.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentihooks_checkpoint.directive import RestoreDirective
from agentihooks_checkpoint.launch import (
    CapturePolicy,
    LaunchAuthority,
    LaunchRecord,
    Registration,
    RestoreSource,
)

from ... import worker_pod as wp
from ...swarm import SeatSpec, SwarmSpec
from ..crd import API_VERSION, KIND
from .podtemplate import apply_template
from .provider import ProviderCredential

#: The worker's setting (``WorkerSettings.project_remotes``): project id → clone URL, as JSON.
PROJECT_REMOTES_ENV = "AGENTIHOOKS_PROJECT_REMOTES"

DOMAIN = wp.DOMAIN
LAUNCH_DIR = wp.LAUNCH_DIR
LAUNCH_FILE = "launch.json"
CREDENTIAL_ENV = "AGENTIHOOKS_WORKER_TOKEN"
CREDENTIAL_KEY = "token"
#: The worker container's name (the original's).
CONTAINER = "agent"
#: The volume holding ``checkpointStore.root`` when the Swarm names its claim.
CHECKPOINT_VOLUME = "checkpoints"
#: Prefix of the ``controller-owner`` label value: ``agentihooks-swarm-<slug>``.
OWNER_PREFIX = "agentihooks-swarm-"

#: Pod and container security defaults that Pod Security Admission's ``restricted`` level admits; a
#: Pod template may change them (the namespace's admission then decides). ``fsGroup`` lets the worker
#: user read the provider credential files (mode 0440) whatever user the template runs it as.
POD_SECURITY: dict[str, Any] = {
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
    "fsGroup": wp.WORKER_GID,
}
CONTAINER_SECURITY: dict[str, Any] = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "readOnlyRootFilesystem": True,
}
#: Mode of the provider credential files (owner and the Pod's ``fsGroup`` read them).
PROVIDER_FILE_MODE = 0o440


def pod_name(execution_id: str) -> str:
    return f"swarm-{execution_id}"


def launch_configmap_name(execution_id: str) -> str:
    """The launch ConfigMap of an attempt an earlier release launched (none is made any more)."""
    return f"swarm-{execution_id}-launch"


def credential_secret_name(execution_id: str) -> str:
    return f"swarm-{execution_id}-credential"


def label(key: str) -> str:
    return f"{DOMAIN}/{key}"


#: The label whose value says which swarm controller owns a Pod.
OWNER_LABEL = label("controller-owner")
#: The annotation naming the operator process (lease holder id) that created an object.
OPERATOR_ANNOTATION = label("operator-id")


def owner_value(swarm: str) -> str:
    """The original's ``controller-owner`` value for ``swarm``: ``agentihooks-swarm-<slug>``."""
    return f"{OWNER_PREFIX}{swarm}"


def owned_by(obj: Mapping[str, Any], swarm: str) -> bool:
    """Whether ``obj`` carries this swarm's ``controller-owner`` value (any other value is foreign)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(OWNER_LABEL) == owner_value(swarm)


@dataclass(frozen=True)
class Owner:
    """The Swarm that owns every object of its executions."""

    name: str
    namespace: str
    uid: str | None
    #: The operator identity (lease holder id), written to the ``operator-id`` annotation.
    controller: str

    @property
    def owner_value(self) -> str:
        """The ``controller-owner`` label value of every object of this swarm."""
        return owner_value(self.name)

    def reference(self) -> list[dict[str, Any]]:
        if not self.uid:
            return []
        return [
            {
                "apiVersion": API_VERSION,
                "kind": KIND,
                "name": self.name,
                "uid": self.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]


@dataclass(frozen=True)
class Execution:
    """One attempt of a seat, as the builders need it."""

    execution_id: str
    generation: int
    seat: str
    task_id: str
    task_generation: int
    grant_id: str
    controller_epoch: int
    directive: RestoreDirective | None = None
    restore_from: RestoreSource | None = None
    store_namespace: str | None = None
    #: The worker lease, when the attempt holds one (its launch record says so).
    worker_lease_seconds: float | None = None


def _metadata(owner: Owner, ex: Execution, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": owner.namespace,
        "labels": {
            OWNER_LABEL: owner.owner_value,
            label("execution-id"): ex.execution_id,
            label("generation"): str(ex.generation),
            label("swarm"): owner.name,
            label("task"): ex.task_id,
        },
        "annotations": {OPERATOR_ANNOTATION: owner.controller},
        "ownerReferences": owner.reference(),
    }


def seat_of(spec: SwarmSpec, seat: str) -> SeatSpec:
    found = spec.seat_index.get(seat)
    if found is None:
        raise KeyError(f"seat {seat!r} is not in the swarm spec")
    return found


def grace_seconds(spec: SwarmSpec) -> float:
    """The worker Pod's grace period: the template's ``terminationGracePeriodSeconds``, else
    :data:`~..worker_pod.DEFAULT_GRACE_SECONDS`."""
    value = ((spec.pod_template.spec if spec.pod_template else None) or {}).get(
        "terminationGracePeriodSeconds"
    )
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return float(wp.DEFAULT_GRACE_SECONDS)


def build_launch_record(
    spec: SwarmSpec, owner: Owner, ex: Execution, *, control_url: str | None = None
) -> LaunchRecord:
    """The worker's ``launch.json``: the original shape plus directive, registration and source."""
    seat = seat_of(spec, ex.seat)
    return LaunchRecord(
        schema_version=1,
        authority=LaunchAuthority(
            execution_id=ex.execution_id,
            generation=ex.generation,
            task_id=ex.task_id,
            seat_id=ex.seat,
            swarm_id=owner.name,
            grant_id=ex.grant_id,
        ),
        harness=spec.harness.name,
        agent=list(spec.harness.command),
        control_url=control_url,
        registration=Registration(
            projects=[seat.project],
            task_generation=ex.task_generation,
            compatibility_key=spec.compatibility_key,
        ),
        restore=ex.directive,
        restore_from=ex.restore_from,
        kill_seconds=wp.kill_seconds(grace_seconds(spec)),
        checkpoint_remote=spec.checkpoint_store.remote,
        store_namespace=ex.store_namespace,
        # only with a control API to renew it through
        worker_lease_seconds=ex.worker_lease_seconds if control_url else None,
        credential_exchange=control_url is not None,
        capture=CapturePolicy(
            mode=spec.capture.mode,
            floor_seconds=spec.capture.floor_seconds,
            interval_seconds=spec.capture.interval_seconds,
        ),
    )


def build_worker_secret(
    token: str,
    owner: Owner,
    ex: Execution,
    provider: ProviderCredential | None = None,
    record: LaunchRecord | None = None,
) -> dict[str, Any]:
    """The attempt's one Secret: the worker's token (key ``token``, an env var of the worker only),
    its launch record (key ``launch.json``, the file the Pod mounts) and the provider credential
    copied from the seat's Secret (keys ``provider.<name>``, still base64 as read). Deleting this
    Secret (the fence does) ends the token and the credential for the attempt."""
    data = {CREDENTIAL_KEY: token}
    if record is not None:
        data[LAUNCH_FILE] = record.model_dump_json(exclude_none=True)
    secret: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": _metadata(owner, ex, credential_secret_name(ex.execution_id)),
        "stringData": data,
    }
    if provider is not None:
        secret["data"] = dict(provider.data)
    return secret


def build_pod_spec(
    spec: SwarmSpec, owner: Owner, ex: Execution, provider: ProviderCredential | None = None
) -> dict[str, Any]:
    """The worker Pod (see :func:`build_worker_pod`), without the template's warnings."""
    return build_worker_pod(spec, owner, ex, provider)[0]


def _provider_env(ex: Execution, provider: ProviderCredential | None) -> list[dict[str, Any]]:
    if provider is None:
        return []
    secret = credential_secret_name(ex.execution_id)
    env: list[dict[str, Any]] = [
        {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": provider.key(name)}}}
        for name in provider.env
    ]
    if provider.files:
        env.append({"name": "AGENTIHOOKS_PROVIDER_FILES", "value": wp.PROVIDER_DIR})
    return env


def build_worker_pod(
    spec: SwarmSpec, owner: Owner, ex: Execution, provider: ProviderCredential | None = None
) -> tuple[dict[str, Any], list[str]]:
    """The worker Pod: never restarted in place; a lost attempt is replaced by a new execution.

    The operator's Pod (names, labels, container, launch record, credentials, security defaults and
    writable emptyDirs under a read-only root) with ``spec.podTemplate`` merged under it; the second
    value lists the template values the operator's own overrode (see :mod:`.podtemplate`).
    """
    seat = seat_of(spec, ex.seat)
    meta = _metadata(owner, ex, pod_name(ex.execution_id))
    meta["annotations"] = {
        **meta["annotations"],
        label("seat"): ex.seat,
        label("grant-ref"): ex.grant_id,
        label("controller-epoch"): str(ex.controller_epoch),
        label("project"): seat.project,
        label("harness"): spec.harness.name,
    }
    env: list[dict[str, Any]] = [
        {"name": "AGENTIHOOKS_LAUNCH_RECORD", "value": f"{LAUNCH_DIR}/{LAUNCH_FILE}"},
        {
            "name": CREDENTIAL_ENV,
            "valueFrom": {
                "secretKeyRef": {"name": credential_secret_name(ex.execution_id), "key": CREDENTIAL_KEY}
            },
        },
    ]
    if spec.checkpoint_store.root:
        env.append({"name": "AGENTIHOOKS_CHECKPOINT_ROOT", "value": spec.checkpoint_store.root})
    if seat.repository:  # where the worker clones the seat's project into an empty worktree
        env.append({"name": PROJECT_REMOTES_ENV, "value": json.dumps({seat.project: seat.repository})})
    env.extend(_provider_env(ex, provider))
    mounts: list[dict[str, Any]] = [{"name": "launch", "mountPath": LAUNCH_DIR, "readOnly": True}]
    launch_items = [{"key": LAUNCH_FILE, "path": LAUNCH_FILE}]
    volumes: list[dict[str, Any]] = [
        {
            "name": "launch",
            "secret": {"secretName": credential_secret_name(ex.execution_id), "items": launch_items},
        }
    ]
    if provider is not None and provider.files:
        mounts.append({"name": "provider", "mountPath": wp.PROVIDER_DIR, "readOnly": True})
        items = [{"key": provider.key(f), "path": f} for f in provider.files]
        volumes.append(
            {
                "name": "provider",
                "secret": {
                    "secretName": credential_secret_name(ex.execution_id),
                    "items": items,
                    "defaultMode": PROVIDER_FILE_MODE,
                },
            }
        )
    store = spec.checkpoint_store
    if store.root and store.claim and not store.remote:  # the checkpoints outlive every attempt's Pod
        mounts.append({"name": CHECKPOINT_VOLUME, "mountPath": store.root})
        volumes.append({"name": CHECKPOINT_VOLUME, "persistentVolumeClaim": {"claimName": store.claim}})
    # The root filesystem is read-only: the worker writes only in its home (attempt folders, harness
    # homes, checkouts) and /tmp.
    for name, path in wp.WRITABLE.items():
        mounts.append({"name": name, "mountPath": path})
        volumes.append({"name": name, "emptyDir": {}})
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "restartPolicy": "Never",
            # The worker never talks to the Kubernetes API; its credential is the per-execution token.
            # A template may name a serviceAccountName; its token is mounted only if the template
            # also sets automountServiceAccountToken: true.
            "automountServiceAccountToken": False,
            # Room for the final capture on a drain (a template value replaces it).
            "terminationGracePeriodSeconds": wp.DEFAULT_GRACE_SECONDS,
            "securityContext": copy.deepcopy(POD_SECURITY),
            "containers": [
                {
                    "name": CONTAINER,
                    "image": spec.image,
                    "env": env,
                    "securityContext": copy.deepcopy(CONTAINER_SECURITY),
                    "volumeMounts": mounts,
                }
            ],
            "volumes": volumes,
        },
    }
    return apply_template(pod, spec.pod_template)
