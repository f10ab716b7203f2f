"""Checks on a parsed record that need no object bytes: scope, identity, commit, material, inventory.

The validator runs them before fetching anything, and the catalog runs the
scope-free part to decide whether a listed checkpoint is complete.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass

from .errors import RecordRefused
from .model import MAX_SEGMENTS, ROLE, CheckpointRecord, Role
from .reasons import Reason
from .scope import StoreScope


@dataclass(frozen=True)
class InventoryItem:
    """An artifact the record lists: ``size`` is ``None`` for a record without inventory (another
    writer's). ``parts``: the stored objects (digest, size) whose bytes, in order, make the artifact
    (the record's ``segments``); ``None``: the artifact is one object, named by its digest."""

    role: str
    path: str
    size: int | None
    digest: str
    parts: tuple[tuple[str, int], ...] | None = None

    @property
    def objects(self) -> list[tuple[str, int | None]]:
        """The stored objects to read for this artifact: (digest, size)."""
        if self.parts is None:
            return [(self.digest, self.size)]
        return list(self.parts)


def check_scope(record: CheckpointRecord, scope: StoreScope) -> None:
    """The record must belong to the scope's task and task generation."""
    a = record.authority
    if a.task_id != scope.task_id or a.task_generation != scope.task_generation:
        raise RecordRefused(Reason.SCOPE_MISMATCH, "record belongs to another task or task generation")


def check_attempt(
    record: CheckpointRecord, *, checkpoint_id: str, execution_id: str, execution_generation: int
) -> None:
    """The record must be the asked-for checkpoint of the registered attempt."""
    a = record.authority
    if a.effective_execution_generation != execution_generation:
        raise RecordRefused(Reason.SCOPE_MISMATCH, "record has a different execution generation")
    if record.checkpoint_id != checkpoint_id:
        raise RecordRefused(Reason.IDENTITY_MISMATCH, "record names another checkpoint id")
    if a.execution_id != execution_id:
        raise RecordRefused(Reason.IDENTITY_MISMATCH, "record names another attempt")


def legacy_path(role: str) -> str:
    """Where an object of a record without inventory is staged: its role, or a name derived from it.

    The original puts no rule on role names, so a name that is not a plain role
    (:data:`~.model.ROLE`) never becomes a path; it is staged under a name
    derived from its hash instead.
    """
    if re.fullmatch(ROLE, role):
        return role
    return "role-" + hashlib.sha256(role.encode("utf-8")).hexdigest()[:32]


def required_roles(record: CheckpointRecord) -> set[str]:
    roles = {Role.TRANSCRIPT.value}
    if record.native_resume_capability == "qualified":
        roles.add(Role.NATIVE_SESSION.value)
    if record.base_commit != record.head_commit:
        roles.add(Role.GIT_BUNDLE.value)
    return roles


def check_content(record: CheckpointRecord) -> list[InventoryItem]:
    """Commit state, material, watermark and inventory; returns the objects to verify."""
    if not record.committed:
        raise RecordRefused(Reason.NOT_COMMITTED, "record is not committed")
    if not required_roles(record) <= set(record.artifact_hashes):
        raise RecordRefused(Reason.MISSING_MATERIAL, "a required artifact role is missing")
    if record.watermark is None:
        raise RecordRefused(Reason.MISSING_WATERMARK, "record has no durable transcript cursor")
    if record.artifacts is None:  # another writer's record (any minor): objects by digest, sizes unknown
        if record.segments:
            raise RecordRefused(Reason.INVENTORY_MISMATCH, "segments without an inventory")
        return [InventoryItem(r, legacy_path(r), None, d) for r, d in sorted(record.artifact_hashes.items())]
    roles = Counter(e.role for e in record.artifacts)
    paths = Counter(e.path for e in record.artifacts)
    if any(n > 1 for n in roles.values()) or any(n > 1 for n in paths.values()):
        raise RecordRefused(Reason.INVENTORY_MISMATCH, "inventory repeats a role or path")
    for path in paths:
        parts = path.split("/")
        if any("/".join(parts[:i]) in paths for i in range(1, len(parts))):
            raise RecordRefused(Reason.INVENTORY_MISMATCH, "an inventory path nests inside another")
    if set(roles) != set(record.artifact_hashes):
        raise RecordRefused(Reason.INVENTORY_MISMATCH, "inventory and artifact_hashes list different roles")
    for e in record.artifacts:
        if record.artifact_hashes[e.role] != e.digest:
            raise RecordRefused(Reason.INVENTORY_MISMATCH, "inventory and artifact_hashes disagree")
    pieces = _segments(record)
    return [InventoryItem(e.role, e.path, e.size, e.digest, pieces.get(e.role)) for e in record.artifacts]


def _segments(record: CheckpointRecord) -> dict[str, tuple[tuple[str, int], ...]]:
    """The record's ``segments`` by role, checked against its inventory: each names a listed role, has
    1 to :data:`MAX_SEGMENTS` objects, and their sizes add up to the artifact's. Whether their bytes
    hash to the artifact's digest is the object check's (:mod:`.validator`)."""
    if not record.segments:
        return {}
    sizes = {e.role: e.size for e in record.artifacts or []}
    out = {}
    for role, segments in record.segments.items():
        if role not in sizes:
            raise RecordRefused(Reason.INVENTORY_MISMATCH, "segments name a role the inventory lacks")
        if not 0 < len(segments) <= MAX_SEGMENTS:
            raise RecordRefused(Reason.INVENTORY_MISMATCH, f"an artifact has 1 to {MAX_SEGMENTS} segments")
        if sum(s.size for s in segments) != sizes[role]:
            raise RecordRefused(Reason.INVENTORY_MISMATCH, "segment sizes do not add up to the artifact's")
        out[role] = tuple((s.digest, s.size) for s in segments)
    return out
