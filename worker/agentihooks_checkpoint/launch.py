"""The launch record a worker boots from.

It keeps the original swarm v2 shape (``schema_version: 1``, ``authority``,
``harness``, ``agent`` argv, time budgets) and adds, optionally, what this
package needs: the restore directive, the registration the worker verifies a
checkpoint against, the fenced attempt whose checkpoint it restores, and
``checkpoint_remote``. Unknown extra fields are kept, so a relayed record
loses nothing.

Field rules are the original's: ``task_id`` may hold ``:`` and ``/``
(:data:`TASK_ID`), and every integer is a JSON integer, never a boolean
(``true`` is not generation 1); time budgets are numbers, never booleans.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, field_validator

from .directive import IDENTIFIER, RestoreDirective
from .scope import NAMESPACE, StoreScope

PROJECT_ID = r"^(github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+|local:[A-Za-z0-9][A-Za-z0-9._-]*|unknown)$"
#: The original's rule for a launch record's task id: an identifier that may also hold ``:`` and ``/``.
TASK_ID = r"^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}$"

#: A time budget in seconds: an integer or a float, never a boolean.
Budget = StrictFloat


def is_identifier(value: str) -> bool:
    """Whether ``value`` is a plain identifier (what a checkpoint manifest and a store scope take)."""
    return re.fullmatch(IDENTIFIER, value) is not None


class LaunchAuthority(BaseModel):
    """Who this attempt is; every field is required by the original format."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    execution_id: str = Field(pattern=IDENTIFIER)
    generation: StrictInt = Field(ge=1)
    task_id: str = Field(pattern=TASK_ID)
    seat_id: str = Field(pattern=IDENTIFIER)
    swarm_id: str = Field(pattern=IDENTIFIER)
    grant_id: str = Field(pattern=IDENTIFIER)


class Registration(BaseModel):
    """What a checkpoint is verified against: task generation, execution generation, projects."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    projects: list[str] = Field(min_length=1)
    task_generation: StrictInt = Field(ge=1)
    #: The image tag the worker runs under; checkpoints are captured under it.
    compatibility_key: str = Field(min_length=1, max_length=255)

    @field_validator("projects")
    @classmethod
    def _project_ids(cls, v: list[str]) -> list[str]:
        import re

        for p in v:
            if not re.fullmatch(PROJECT_ID, p):
                raise ValueError(f"not a project id: {p!r}")
        return v


class RestoreSource(BaseModel):
    """The fenced attempt whose checkpoint the replacement restores."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    execution_id: str = Field(pattern=IDENTIFIER)
    execution_generation: StrictInt = Field(ge=1)


class CapturePolicy(BaseModel):
    """When the worker captures: on the agent's own events (``continuous``: a turn ended, a tool ran, a
    session file changed; at most one capture per ``floor_seconds``) with a periodic fallback every
    ``interval_seconds``, or on that timer only (``periodic``, the earlier releases' behaviour)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["continuous", "periodic"] = "continuous"
    floor_seconds: Budget = Field(default=1, ge=0.2, le=60)
    interval_seconds: Budget = Field(default=300, ge=10, le=3600)


class LaunchRecord(BaseModel):
    """``/var/run/swarm/launch/launch.json``."""

    model_config = ConfigDict(extra="allow", frozen=True)

    schema_version: Literal[1]
    authority: LaunchAuthority
    harness: Literal["claude", "codex"]
    agent: list[str] = Field(min_length=1)
    exporter: list[str] | None = None
    control_url: str | None = None
    startup_seconds: Budget = Field(default=60, gt=0, le=300)
    quiesce_seconds: Budget = Field(default=30, gt=0, le=300)
    checkpoint_seconds: Budget = Field(default=60, gt=0, le=300)
    kill_seconds: Budget = Field(default=10, gt=0, le=300)
    # -- additions of this package (all optional, so original records still parse) --
    registration: Registration | None = None
    restore: RestoreDirective | None = None
    restore_from: RestoreSource | None = None
    checkpoint_remote: StrictBool = False
    #: The namespace the attempt's checkpoint scope lives under (absent: the name-only layout).
    store_namespace: str | None = Field(default=None, pattern=NAMESPACE)
    #: The worker's lease on its attempt: renewed through ``control_url``; the worker stops its agent
    #: before it can have run out without a renewal. Absent: no lease (an earlier controller).
    worker_lease_seconds: float | None = Field(default=None, ge=15, le=3600)
    #: When the worker captures (absent: the worker's own settings, continuous by default).
    capture: CapturePolicy | None = None
    #: The worker first trades the credential its Pod started with for one only it knows
    #: (``POST .../credential``), before anything else reaches the controller. Absent: an earlier
    #: controller, which has no such route.
    credential_exchange: StrictBool = False

    def store_scope(self) -> StoreScope | None:
        """The checkpoint scope this attempt reads and writes (``None`` without a registration)."""
        if self.registration is None:
            return None
        a = self.authority
        return StoreScope(
            swarm=a.swarm_id,
            task_id=a.task_id,
            task_generation=self.registration.task_generation,
            namespace=self.store_namespace,
        )

    @field_validator("schema_version", mode="before")
    @classmethod
    def _integer_version(cls, v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError("schema_version is the integer 1")
        return v
