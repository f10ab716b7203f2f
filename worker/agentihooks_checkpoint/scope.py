"""Where a task's checkpoints live in a store.

Every storage path is scoped by swarm, task and task generation, so a worker
granted one scope can never name another task's objects, and a record that
claims a newer task generation than its scope is a ``scope_mismatch``.

A scope with a ``namespace`` lives under ``namespaces/<namespace>/swarms/...``:
two same-named Swarms of two namespaces that share one bucket or root never
meet (issue 22). Without it, the name-only layout of earlier releases, which
task generations begun before the upgrade keep to the end.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

from .directive import IDENTIFIER

_SAFE = re.compile(IDENTIFIER)
#: A Kubernetes namespace (an RFC 1123 DNS label).
NAMESPACE = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"


class StoreScope(BaseModel):
    """The (swarm, task, task generation) a store handle is granted."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    swarm: str = Field(pattern=IDENTIFIER)
    task_id: str = Field(pattern=IDENTIFIER)
    task_generation: int = Field(ge=1)
    #: The Swarm's namespace; ``None`` for a task generation begun under the name-only layout.
    namespace: str | None = Field(default=None, pattern=NAMESPACE)

    @property
    def prefix(self) -> str:
        """The key prefix of this scope, ending in ``/``."""
        tail = f"swarms/{self.swarm}/tasks/{self.task_id}/gen-{self.task_generation}/"
        return tail if self.namespace is None else f"namespaces/{self.namespace}/{tail}"


def safe_segment(value: str) -> str:
    """Return ``value`` if it can be used as one path segment, else raise ``ValueError``."""
    if not _SAFE.fullmatch(value) or value in {".", ".."}:
        raise ValueError("not a safe path segment")
    return value
