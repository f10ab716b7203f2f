"""Pure rules of the scoped checkpoint routes: which keys exist, which a worker may read or write.

A key is one of three shapes, relative to the worker's own scope; anything
else (``..``, absolute paths, backslashes, encoded tricks, other folders) is
refused before the store is touched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from agentihooks_checkpoint.directive import RestoreDirective
from agentihooks_checkpoint.layout import object_key, pointer_key
from agentihooks_checkpoint.scope import StoreScope

from ...recovery.store.records import AttemptRecord
from ..errors import bad_request, forbidden

_ID = r"[A-Za-z0-9][A-Za-z0-9._@-]{0,127}"
_OBJECT = re.compile(r"^objects/sha256/([0-9a-f]{64})$")
_CKPT = re.compile(rf"^checkpoints/({_ID})/(manifest-([0-9a-f]{{64}})|committed)\.json$")

KeyKind = Literal["object", "manifest", "pointer"]


@dataclass(frozen=True)
class StoreKey:
    kind: KeyKind
    key: str
    #: The object's hex digest, or the checkpoint id.
    name: str
    #: A manifest's own sha256 hex (its key names it).
    digest: str | None = None


def parse_key(key: str) -> StoreKey:
    """Classify ``key`` or raise 400 ``invalid_key`` (nothing is read or written)."""
    if m := _OBJECT.fullmatch(key):
        return StoreKey("object", key, m.group(1))
    m = _CKPT.fullmatch(key)
    if m and ".." not in m.group(1):
        if m.group(3):
            return StoreKey("manifest", key, m.group(1), m.group(3))
        return StoreKey("pointer", key, m.group(1))
    raise bad_request("not a checkpoint store key", "invalid_key")


def own_scope(swarm: str, record: AttemptRecord) -> StoreScope:
    return StoreScope(
        swarm=swarm,
        task_id=record.task_id,
        task_generation=record.task_generation,
        namespace=record.store_namespace,
    )


def check_scope_params(
    scope: StoreScope,
    swarm: str | None,
    task_id: str | None,
    generation: str | None,
    namespace: str | None = None,
) -> None:
    """The scope the client names must be its own; another task or generation is ``forbidden_scope``."""
    named = (swarm, task_id, generation, namespace)
    if named != (scope.swarm, scope.task_id, str(scope.task_generation), scope.namespace):
        raise forbidden()


def named_checkpoint(directive: RestoreDirective | None) -> str | None:
    """The one checkpoint a worker may read: the one its directive names (none for fresh)."""
    return directive.checkpoint_id if directive is not None else None


@dataclass(frozen=True)
class Named:
    """What the named checkpoint's commit pointer and manifest make readable."""

    checkpoint_id: str | None
    manifest: str | None = None
    digests: frozenset[str] = frozenset()

    def readable_keys(self) -> list[str]:
        if self.checkpoint_id is None:
            return []
        return [pointer_key(self.checkpoint_id), *([self.manifest] if self.manifest else [])]


def readable(key: StoreKey, named: Named) -> bool:
    """Only the named checkpoint's pointer, the manifest it commits and the objects that manifest lists."""
    if named.checkpoint_id is None:
        return False
    if key.kind == "object":
        return key.key in {object_key(d) for d in named.digests}
    return key.key in named.readable_keys()
