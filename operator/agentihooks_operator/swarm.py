"""The Swarm a controller recovers, as plain pydantic models.

The kopf layer parses a ``Swarm`` custom resource's ``spec`` into
:class:`SwarmSpec`; the recovery core, the Pod builders and the control API
take these models and never a raw dict. Field names are the CRD's (camelCase
on the wire, snake_case in Python).

Every field's docstring is its description in the CRD (``use_attribute_docstrings``), which is what
``kubectl explain swarm.spec...`` prints; tests/unit/chart/test_crd.py fails on a field without one.
"""

from __future__ import annotations

import hashlib
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from . import worker_pod as wp

IDENTIFIER = r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$"
SEAT_NAME = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"
#: A Kubernetes object name (DNS subdomain).
OBJECT_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
#: Marks a field whose CRD schema is not derived from the model (see :mod:`.k8s.crd`).
SCHEMA_MARK = "x-agentihooks-schema"
PROJECT_ID = r"^(github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+|local:[A-Za-z0-9][A-Za-z0-9._-]*|unknown)$"


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
    )


class ProviderCredentials(_Model):
    """Where a seat's provider account credential is: a Secret in the Swarm's namespace.

    The Secret's keys are the harness's own names (``ANTHROPIC_API_KEY``, ``CLAUDE_CODE_OAUTH_TOKEN``,
    ``OPENAI_API_KEY``, ``auth.json``...; docs/install.md). The operator copies the recognised keys into
    each attempt's own credential Secret, which the fence deletes; the values never pass through the
    launch record, a ConfigMap, an Event, a log line, ``status`` or a checkpoint.
    """

    secret_name: str = Field(min_length=1, max_length=253, pattern=OBJECT_NAME)
    """Name of the Secret (same namespace as the Swarm)."""


class HarnessSpec(_Model):
    """The agent harness every seat runs."""

    name: Literal["claude", "codex"]
    """The harness: `claude` (Claude Code) or `codex` (Codex CLI). It decides where sessions are found
    and how a native resume is started."""
    command: list[str] = Field(min_length=1)
    """The agent argv the worker runs for a fresh or reconstructed start."""
    credentials: ProviderCredentials | None = None
    """The provider account every seat uses unless the seat names its own (`seats[].credentials`)."""


class TaskSpec(_Model):
    """The task a seat works on."""

    id: str = Field(pattern=IDENTIFIER)
    """Id of the task (letters, digits and `._@-`, at most 128 characters); a replacement holds the
    same task."""
    text: str = Field(min_length=1, max_length=65536)
    """The task's text (at most 64 KiB), given to the agent on a fresh or reconstructed start."""


class SeatSpec(_Model):
    """One seat: an agent on one task in one project. The operator keeps exactly one execution of it."""

    name: str = Field(pattern=SEAT_NAME)
    """Name of the seat, unique in the Swarm (a DNS label: lower-case letters, digits and `-`)."""
    project: str = Field(pattern=PROJECT_ID)
    """The project: `github.com/<owner>/<repo>`, `local:<name>` or `unknown`. A checkpoint is restored
    only into the project it was captured in."""
    repository: str | None = None
    """Clone URL of the project (optional; the worker clones when the worktree has no repository)."""
    task: TaskSpec
    """The seat's task."""
    credentials: ProviderCredentials | None = None
    """This seat's own provider account (its account slot's Secret); overrides `harness.credentials`."""


class MasterSpec(_Model):
    """A master agent that may post restore decisions for this Swarm's seats."""

    agent: str = Field(pattern=IDENTIFIER)
    """The master's agent id (letters, digits and `._@-`), unique in the Swarm."""
    credential_secret: str = Field(min_length=1, max_length=253)
    """Name of the Secret (same namespace) whose `token` key is this master's credential."""


class RecoverySpec(_Model):
    """How the operator recovers failed attempts."""

    automation: bool = True
    """`true`: the operator decides by itself where the rules allow it (a native resume from a
    verified checkpoint, a fresh start for a superseded spawn). `false`: every failed attempt waits for
    a decision of a master or the operator."""
    image_pull_grace_seconds: int = Field(default=120, ge=0, le=3600)
    """Seconds a container may keep failing to pull its image before the attempt counts as failed
    (`image_pull`)."""
    pass_interval_seconds: float = Field(default=5.0, gt=0, le=600)
    """Seconds between two recovery passes of the Swarm; a Pod event starts one at once as well."""
    worker_lease_seconds: int = Field(default=120, ge=15, le=3600)
    """Seconds a worker's lease on its attempt lasts after its last acknowledged renewal (it renews
    about every quarter of it). A worker that cannot renew stops its agent before the lease runs out;
    an attempt whose death is not proven (its node lost, its Pod gone) is replaced only after its lease
    ran out, plus a clock margin. The default rides out an operator restart or rolling update (the
    workers' own retry budget is 120 s too); shorter replaces lost nodes sooner, at the risk of agents
    stopping while every replica is away."""


class CaptureSpec(_Model):
    """When workers checkpoint the running agent."""

    mode: Literal["continuous", "periodic"] = "continuous"
    """`continuous`: on the agent's own events (a turn ended or a tool ran, from the harness's hooks;
    a session file changed), so an abrupt death loses about the turn in flight; `periodic`: only every
    `intervalSeconds` (an abrupt death loses up to that much work)."""
    floor_seconds: float = Field(default=1.0, ge=0.2, le=60)
    """The shortest time between two captures: a burst of events is one capture."""
    interval_seconds: int = Field(default=300, ge=10, le=3600)
    """Seconds between periodic captures (in `continuous` mode, the fallback for anything no event
    announced)."""


class RetentionSpec(_Model):
    """Which superseded checkpoints the operator removes from its checkpoint store."""

    enabled: bool = True
    """`false`: nothing is ever removed."""
    keep_newest: int = Field(default=10, ge=1, le=100000)
    """Per attempt, the newest this many checkpoints are kept."""
    keep_younger_seconds: int = Field(default=3600, ge=0, le=31536000)
    """Every checkpoint younger than this is kept."""
    grace_seconds: int = Field(default=3600, ge=600, le=31536000)
    """An object no checkpoint lists is removed only once it is this old (a capture in flight
    uploads its objects before its record; it never takes longer than 300 s)."""
    interval_seconds: int = Field(default=600, ge=60, le=86400)
    """Seconds between two runs (by the lease holder)."""
    dry_run: bool = False
    """`true`: nothing is removed; the operator logs and counts what would be."""


class CheckpointStoreSpec(_Model):
    """Where the Swarm's workers keep their checkpoints."""

    bucket: str | None = None
    """A bucket name. Accepted but not read by this version: the operator's checkpoint store is the
    chart's `checkpointStore` setting, which workers reach with `remote: true`."""
    root: str | None = None
    """Absolute path of a checkpoint folder inside the worker Pods (their
    `AGENTIHOOKS_CHECKPOINT_ROOT`). Without `remote`, a volume that outlives the Pod must hold it:
    name its PersistentVolumeClaim in `claim`, or mount one at (or above) the path with `podTemplate`;
    a root backed by no volume, or by an emptyDir, blocks the launch."""
    claim: str | None = Field(
        default=None, min_length=1, max_length=253, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
    )
    """Name of a PersistentVolumeClaim (the Swarm's namespace) the operator mounts read-write at `root`
    on every worker Pod; every attempt of the Swarm, and its replacements, see the same checkpoints.
    The claim must allow the Pods of all seats at once (ReadWriteMany, or ReadWriteOnce on one node)."""
    remote: bool = False
    """`true`: workers read and write checkpoints through the controller's scoped routes, so worker
    Pods need no bucket credentials or checkpoint volume of their own."""

    @model_validator(mode="after")
    def _root_is_absolute(self) -> CheckpointStoreSpec:
        if self.root is not None and not self.root.startswith("/"):
            raise ValueError("checkpointStore.root must be an absolute path")
        if self.claim is not None and self.root is None:
            raise ValueError("checkpointStore.claim needs checkpointStore.root: the path it is mounted at")
        return self


class AccountBrokerSpec(_Model):
    """An external account broker: provider account slots are released over HTTP instead of Redis."""

    url: str = Field(pattern=r"^https?://[^\s]+$", max_length=2048)
    """Base URL of the broker (`http://` or `https://`)."""
    credential_secret: str | None = Field(default=None, min_length=1, max_length=253)
    """Name of the Secret (same namespace) whose `token` key is the bearer credential for the broker."""
    timeout_seconds: float = Field(default=10.0, gt=0, le=120)
    """Seconds to wait for one broker request before its outcome counts as unknown."""


def _keys_known(where: str, value: dict[str, Any], allowed: tuple[str, ...], owned: dict[str, str]) -> None:
    unknown = sorted(set(value) - set(allowed) - set(owned))
    if unknown:
        raise ValueError(f"{where} has no field {', '.join(unknown)} (a template sets {', '.join(allowed)})")


class PodTemplate(_Model):
    """The worker Pod template: merged under the operator's own fields, which always win.

    ``metadata`` takes ``labels`` and ``annotations``; ``spec`` takes the
    :data:`~.worker_pod.POD_FIELDS` of a ``PodSpec`` and, under ``container``, the
    :data:`~.worker_pod.CONTAINER_FIELDS` of the worker container, each in its Kubernetes shape (the
    CRD validates them against the Kubernetes OpenAPI definitions). Fields the operator owns are
    refused by the CRD; should one arrive anyway, the Pod gets the operator's value and a Warning Event.
    """

    metadata: dict[str, Any] = Field(default_factory=dict)
    """`labels` and `annotations` added to the worker Pod's own."""
    spec: dict[str, Any] = Field(default_factory=dict)
    """Fields of the worker Pod's spec and, under `container`, of its worker container."""

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, Any]) -> dict[str, Any]:
        _keys_known("podTemplate.metadata", value, wp.METADATA_FIELDS, wp.OWNED_METADATA)
        for name in wp.METADATA_FIELDS:
            entries = value.get(name) or {}
            if not isinstance(entries, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in entries.items()
            ):
                raise ValueError(f"podTemplate.metadata.{name} must map strings to strings")
        return value

    @field_validator("spec")
    @classmethod
    def _spec(cls, value: dict[str, Any]) -> dict[str, Any]:
        _keys_known("podTemplate.spec", value, (*wp.POD_FIELDS, "container"), wp.OWNED_POD)
        container = value.get("container") or {}
        if not isinstance(container, dict):
            raise ValueError("podTemplate.spec.container must be an object")
        _keys_known("podTemplate.spec.container", container, wp.CONTAINER_FIELDS, wp.OWNED_CONTAINER)
        for where, obj, lists in (
            (
                "podTemplate.spec",
                value,
                ("imagePullSecrets", "tolerations", "topologySpreadConstraints", "volumes"),
            ),
            ("podTemplate.spec.container", container, ("env", "envFrom", "volumeMounts")),
        ):
            for name in lists:
                items = obj.get(name)
                if items is not None and (
                    not isinstance(items, list) or not all(isinstance(i, dict) for i in items)
                ):
                    raise ValueError(f"{where}.{name} must be a list of objects")
        return value


def _keyed_by(key: str) -> dict[str, Any]:
    """A list the API server itself keeps unique by ``key`` (a map-type list): a Swarm naming the same
    seat or master twice is refused at admission (``Duplicate value``), not only by the operator."""
    return {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": [key]}


class SwarmSpec(_Model):
    """A swarm of agent seats whose worker Pods the operator launches and recovers: exactly one
    replacement per failed attempt, restored from a verified checkpoint where one exists."""

    image: str = Field(min_length=1)
    """The worker image; its tag is the compatibility key of checkpoints (a checkpoint is offered only
    to workers of the image tag it was captured under)."""
    harness: HarnessSpec
    """The agent harness the seats run."""
    seats: list[SeatSpec] = Field(min_length=1, json_schema_extra=_keyed_by("name"))
    """The seats (at least one, names unique)."""
    masters: list[MasterSpec] = Field(default_factory=list, json_schema_extra=_keyed_by("agent"))
    """Master agents that may post restore decisions (agents unique)."""
    recovery: RecoverySpec = Field(default_factory=RecoverySpec)
    """How failed attempts are recovered."""
    checkpoint_store: CheckpointStoreSpec = Field(default_factory=CheckpointStoreSpec)
    """Where the workers keep their checkpoints."""
    capture: CaptureSpec = Field(default_factory=CaptureSpec)
    """When the workers checkpoint the running agent."""
    retention: RetentionSpec = Field(default_factory=RetentionSpec)
    """Which superseded checkpoints the operator removes (never one a fence, decision, directive,
    relaunch or outcome names, never an object a kept checkpoint lists)."""
    account_broker: AccountBrokerSpec | None = None
    """Where account slots come from: absent = the built-in pool in Redis (released with the fence)."""
    pod_template: PodTemplate | None = Field(default=None, json_schema_extra={SCHEMA_MARK: "podTemplate"})
    """Fields of the worker Pod beyond the operator's own (resources, env, volumes, scheduling...), in
    their Kubernetes shapes; the operator's own fields always win."""

    @model_validator(mode="after")
    def _unique_names(self) -> SwarmSpec:
        names = [s.name for s in self.seats]
        if len(names) != len(set(names)):
            raise ValueError("seat names must be unique")
        agents = [m.agent for m in self.masters]
        if len(agents) != len(set(agents)):
            raise ValueError("master agents must be unique")
        return self

    @cached_property
    def fingerprint(self) -> str:
        """A digest of the whole spec, computed once per spec object (a changed spec is a new one)."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:16]

    @cached_property
    def seat_index(self) -> dict[str, SeatSpec]:
        """Seat name → seat, built once per spec (a pass looks seats up by name, never by a scan)."""
        return {s.name: s for s in self.seats}

    def credentials_of(self, seat: SeatSpec) -> ProviderCredentials | None:
        """The provider credential Secret of ``seat``: its own, else the harness's, else none."""
        return seat.credentials or self.harness.credentials

    @property
    def compatibility_key(self) -> str:
        """The image tag (``latest`` when the image names none; a digest counts as the tag)."""
        ref = self.image
        if "@" in ref:
            return ref.split("@", 1)[1]
        last = ref.rsplit("/", 1)[-1]
        return last.split(":", 1)[1] if ":" in last else "latest"
