"""Which checkpoint store this worker reads and writes through.

Precedence: the controller's scoped routes when the launch record says
``checkpoint_remote: true``; else ``AGENTIHOOKS_CHECKPOINT_BUCKET``; else
``AGENTIHOOKS_CHECKPOINT_ROOT`` (absolute paths only). A directive that names
a checkpoint while none of these is set is refused with the spec's message.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal, TypeVar

from agentihooks_checkpoint.reasons import NO_STORE_MESSAGE

from .errors import Refused, StoreSelectionError
from .settings import WorkerSettings

StoreKind = Literal["remote", "bucket", "root"]
T = TypeVar("T")


@dataclass(frozen=True)
class StoreChoice:
    """The store picked at boot; ``location`` is a bucket name, an absolute folder or the control URL."""

    kind: StoreKind
    location: str


def choose_store(settings: WorkerSettings, *, remote: bool, control_url: str | None) -> StoreChoice | None:
    """Apply the precedence above; ``None`` when no store is configured."""
    root = settings.checkpoint_root
    if root and not os.path.isabs(root):
        raise StoreSelectionError(
            f"AGENTIHOOKS_CHECKPOINT_ROOT must be an absolute path; got a relative one ({root!r})"
        )
    if remote:
        if not control_url:
            raise StoreSelectionError("checkpoint_remote is true but the launch record has no control_url")
        return StoreChoice("remote", control_url)
    if settings.checkpoint_bucket:
        return StoreChoice("bucket", settings.checkpoint_bucket)
    if root:
        return StoreChoice("root", root)
    return None


def require_store(store: T | None) -> T:
    """The store, or the spec's refusal when a checkpoint is named and there is none."""
    if store is None:
        raise Refused("no_checkpoint_store", NO_STORE_MESSAGE)
    return store
