"""The Swarm a controller recovers, as plain pydantic models.

The kopf layer parses a ``Swarm`` custom resource's ``spec`` into
:class:`SwarmSpec`; the recovery core, the Pod builders and the control API
take these models and never a raw dict. Field names are the CRD's (camelCase
on the wire, snake_case in Python).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

IDENTIFIER = r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$"
SEAT_NAME = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"
PROJECT_ID = r"^(github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+|local:[A-Za-z0-9][A-Za-z0-9._-]*|unknown)$"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True)


class HarnessSpec(_Model):
    name: Literal["claude", "codex"]
    #: The agent argv the worker runs for a fresh or reconstructed start.
    command: list[str] = Field(min_length=1)


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

    @model_validator(mode="after")
    def _unique_names(self) -> SwarmSpec:
        names = [s.name for s in self.seats]
        if len(names) != len(set(names)):
            raise ValueError("seat names must be unique")
        agents = [m.agent for m in self.masters]
        if len(agents) != len(set(agents)):
            raise ValueError("master agents must be unique")
        return self

    @property
    def compatibility_key(self) -> str:
        """The image tag (``latest`` when the image names none; a digest counts as the tag)."""
        ref = self.image
        if "@" in ref:
            return ref.split("@", 1)[1]
        last = ref.rsplit("/", 1)[-1]
        return last.split(":", 1)[1] if ":" in last else "latest"
