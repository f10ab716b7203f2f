"""The Swarm a controller recovers, as plain pydantic models.

The kopf layer parses a ``Swarm`` custom resource's ``spec`` into
:class:`SwarmSpec`; the recovery core, the Pod builders and the control API
take these models and never a raw dict. Field names are the CRD's (camelCase
on the wire, snake_case in Python).
"""

from __future__ import annotations

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
    model_config = ConfigDict(extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True)


class ProviderCredentials(_Model):
    """Where a seat's provider account credential is: a Secret in the Swarm's namespace.

    The Secret's keys are the harness's own names (``ANTHROPIC_API_KEY``, ``CLAUDE_CODE_OAUTH_TOKEN``,
    ``OPENAI_API_KEY``, ``auth.json``...; docs/install.md). The operator copies the recognised keys into
    each attempt's own credential Secret, which the fence deletes; the values never pass through the
    launch record, a ConfigMap, an Event, a log line, ``status`` or a checkpoint.
    """

    #: Name of the Secret (same namespace as the Swarm).
    secret_name: str = Field(min_length=1, max_length=253, pattern=OBJECT_NAME)


class HarnessSpec(_Model):
    name: Literal["claude", "codex"]
    #: The agent argv the worker runs for a fresh or reconstructed start.
    command: list[str] = Field(min_length=1)
    #: The provider account every seat uses unless the seat names its own (``seats[].credentials``).
    credentials: ProviderCredentials | None = None


class TaskSpec(_Model):
    id: str = Field(pattern=IDENTIFIER)
    text: str = Field(min_length=1, max_length=65536)


class SeatSpec(_Model):
    name: str = Field(pattern=SEAT_NAME)
    #: ``github.com/<owner>/<repo>`` | ``local:<name>`` | ``unknown``.
    project: str = Field(pattern=PROJECT_ID)
    #: Clone URL of the project (optional; the worker clones when the worktree has no repository).
    repository: str | None = None
    task: TaskSpec
    #: This seat's own provider account (its account slot's Secret); overrides ``harness.credentials``.
    credentials: ProviderCredentials | None = None


class MasterSpec(_Model):
    agent: str = Field(pattern=IDENTIFIER)
    #: Name of the Secret (same namespace) whose ``token`` key is this master's credential.
    credential_secret: str = Field(min_length=1, max_length=253)


class RecoverySpec(_Model):
    automation: bool = True
    image_pull_grace_seconds: int = Field(default=120, ge=0, le=3600)
    pass_interval_seconds: float = Field(default=5.0, gt=0, le=600)


class CheckpointStoreSpec(_Model):
    bucket: str | None = None
    root: str | None = None
    remote: bool = False

    @model_validator(mode="after")
    def _root_is_absolute(self) -> CheckpointStoreSpec:
        if self.root is not None and not self.root.startswith("/"):
            raise ValueError("checkpointStore.root must be an absolute path")
        return self


class AccountBrokerSpec(_Model):
    """An external account broker: provider account slots are released over HTTP instead of Redis."""

    #: Base URL of the broker (``http://`` or ``https://``).
    url: str = Field(pattern=r"^https?://[^\s]+$", max_length=2048)
    #: Name of the Secret (same namespace) whose ``token`` key is the bearer credential for the broker.
    credential_secret: str | None = Field(default=None, min_length=1, max_length=253)
    #: Seconds to wait for one broker request before its outcome counts as unknown.
    timeout_seconds: float = Field(default=10.0, gt=0, le=120)


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
    spec: dict[str, Any] = Field(default_factory=dict)

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


class SwarmSpec(_Model):
    #: The worker image; its tag is the compatibility key of checkpoints.
    image: str = Field(min_length=1)
    harness: HarnessSpec
    seats: list[SeatSpec] = Field(min_length=1)
    masters: list[MasterSpec] = Field(default_factory=list)
    recovery: RecoverySpec = Field(default_factory=RecoverySpec)
    checkpoint_store: CheckpointStoreSpec = Field(default_factory=CheckpointStoreSpec)
    #: Where account slots come from: absent = the built-in pool in Redis (released with the fence).
    account_broker: AccountBrokerSpec | None = None
    #: Fields of the worker Pod beyond the operator's own (resources, env, volumes, scheduling...).
    pod_template: PodTemplate | None = Field(default=None, json_schema_extra={SCHEMA_MARK: "podTemplate"})

    @model_validator(mode="after")
    def _unique_names(self) -> SwarmSpec:
        names = [s.name for s in self.seats]
        if len(names) != len(set(names)):
            raise ValueError("seat names must be unique")
        agents = [m.agent for m in self.masters]
        if len(agents) != len(set(agents)):
            raise ValueError("master agents must be unique")
        return self

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
