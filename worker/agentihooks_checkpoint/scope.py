"""Where a task's checkpoints live in a store.

Every storage path is scoped by swarm, task and task generation, so a worker
granted one scope can never name another task's objects, and a record that
claims a newer task generation than its scope is a ``scope_mismatch``.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

from .directive import IDENTIFIER

_SAFE = re.compile(IDENTIFIER)


class StoreScope(BaseModel):
    """The (swarm, task, task generation) a store handle is granted."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    swarm: str = Field(pattern=IDENTIFIER)
    task_id: str = Field(pattern=IDENTIFIER)
    task_generation: int = Field(ge=1)

    @property
    def prefix(self) -> str:
        """The key prefix of this scope, ending in ``/``."""
        return f"swarms/{self.swarm}/tasks/{self.task_id}/gen-{self.task_generation}/"


def safe_segment(value: str) -> str:
    """Return ``value`` if it can be used as one path segment, else raise ``ValueError``."""
    if not _SAFE.fullmatch(value) or value in {".", ".."}:
        raise ValueError("not a safe path segment")
    return value
