"""The store interface: five primitives per backend, the checkpoint logic on top.

Backends implement byte-level primitives on keys relative to a scope's
prefix (read, size, atomic write, write-once, list). Everything that gives
those bytes meaning lives here, once: content-addressed objects, the commit
order (objects, then the manifest, then the write-once pointer holding the
manifest's sha256), and the catalog listing the controller chooses from.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..catalog import CheckpointSummary
from ..errors import ObjectMissing, RecordRefused, StoreError
from ..hashing import digest_of_bytes, digest_of_file
from ..layout import checkpoint_id_of_pointer, manifest_key, object_key, pointer_key
from ..model import CheckpointRecord
from ..record import RECORD_SIZE_CAP, encode_record, load_json, parse_record
from ..scope import StoreScope

POINTER_SIZE_CAP = 4096


@dataclass(frozen=True)
class StoredObject:
    """An uploaded artifact: its digest (``sha256:<hex>``) and size in bytes."""

    digest: str
    size: int


class CheckpointStore(ABC):
    """A checkpoint store. Implementations provide the abstract primitives only."""

    #: How many objects a verifier may fetch at once from this store.
    max_concurrency: int = 1

    # -- primitives (keys are relative to ``scope.prefix``) --
    @abstractmethod
    def open_read(self, scope: StoreScope, key: str) -> AbstractContextManager[BinaryIO]:
        """A readable stream of the object; raises :class:`ObjectMissing` if absent."""

    @abstractmethod
    def size_of(self, scope: StoreScope, key: str) -> int | None:
        """The object's size, or ``None`` when absent. Cheap: a stat or HEAD."""

    def identity(self, scope: StoreScope, key: str) -> str | None:
        """A cheap identity of the stored object that changes whenever its bytes may have (a local
        file's device, inode, size and change time; an S3 object's ETag, version and time), or
        ``None`` when the store has none to give: then only hashing it again can tell."""
        del scope, key
        return None

    def delete(self, scope: StoreScope, key: str) -> None:
        """Remove ``key`` (absent: nothing to do). Only retention deletes (:mod:`..retention`); a store
        that cannot delete raises :class:`StoreError`, and nothing is collected there."""
        del scope, key
        raise StoreError("this store does not delete")

    def modified_at(self, scope: StoreScope, key: str) -> float | None:
        """When ``key`` was last written (seconds since the epoch), or ``None`` when absent."""
        del scope, key
        raise StoreError("this store does not tell when an object was written")

    @abstractmethod
    def write_file(self, scope: StoreScope, key: str, path: Path) -> None:
        """Store the file's bytes under ``key``, replacing atomically (readers see old or new)."""

    @abstractmethod
    def write_once(self, scope: StoreScope, key: str, data: bytes) -> None:
        """Store ``data`` under ``key`` unless it exists (then raise :class:`CheckpointExists`)."""

    @abstractmethod
    def write_bytes(self, scope: StoreScope, key: str, data: bytes) -> None:
        """Store ``data`` under ``key``, replacing atomically."""

    @abstractmethod
    def list_keys(self, scope: StoreScope, under: str) -> list[str]:
        """Every key starting with ``under`` (relative to the scope), in any order."""

    # -- checkpoint logic --
    def read_bytes(self, scope: StoreScope, key: str, cap: int) -> bytes:
        """The whole object if it is at most ``cap`` bytes; ``ValueError`` if larger."""
        with self.open_read(scope, key) as f:
            data = f.read(cap + 1)
        if len(data) > cap:
            raise ValueError("object exceeds its size cap")
        return data

    def put_object(self, scope: StoreScope, path: Path) -> StoredObject:
        """Upload a file as a content-addressed object and return its digest and size."""
        digest, size = digest_of_file(path)
        self.write_file(scope, object_key(digest), path)
        return StoredObject(digest, size)

    def write_manifest(self, scope: StoreScope, checkpoint_id: str, data: bytes) -> None:
        """Write a manifest (named by its hash). It is not a checkpoint until committed."""
        hexdigest = digest_of_bytes(data).removeprefix("sha256:")
        self.write_bytes(scope, manifest_key(checkpoint_id, hexdigest), data)

    def is_committed(self, scope: StoreScope, checkpoint_id: str) -> bool:
        return self.size_of(scope, pointer_key(checkpoint_id)) is not None

    def commit(self, scope: StoreScope, record: CheckpointRecord) -> str:
        """Write the record, then the write-once pointer with its sha256; return that hex."""
        data = encode_record(record)
        self.write_manifest(scope, record.checkpoint_id, data)
        return self.commit_written(scope, record.checkpoint_id, data)

    def commit_written(self, scope: StoreScope, checkpoint_id: str, data: bytes) -> str:
        """Write the commit pointer for manifest bytes ``data`` already written."""
        hexdigest = digest_of_bytes(data).removeprefix("sha256:")
        pointer = {"manifest": manifest_key(checkpoint_id, hexdigest), "sha256": hexdigest}
        self.write_once(scope, pointer_key(checkpoint_id), json.dumps(pointer, sort_keys=True).encode())
        return hexdigest

    def read_pointer(self, scope: StoreScope, checkpoint_id: str) -> tuple[str, str]:
        """``(manifest key, sha256 hex)`` of a committed checkpoint.

        Raises :class:`ObjectMissing` when not committed, ``ValueError`` when the pointer is unreadable.
        """
        raw = self.read_bytes(scope, pointer_key(checkpoint_id), POINTER_SIZE_CAP)
        obj = load_json(raw)
        if not isinstance(obj, dict):
            raise ValueError("pointer is not an object")
        hexdigest = obj.get("sha256")
        if not isinstance(hexdigest, str):
            raise ValueError("pointer carries no sha256")
        key = manifest_key(checkpoint_id, hexdigest)
        if obj.get("manifest") != key:
            raise ValueError("pointer names another manifest")
        return key, hexdigest

    def committed_ids(self, scope: StoreScope) -> Iterator[str]:
        for key in self.list_keys(scope, "checkpoints/"):
            cid = checkpoint_id_of_pointer(key)
            if cid is not None:
                yield cid

    def list_checkpoints(
        self, scope: StoreScope, *, execution_id: str | None = None
    ) -> list[CheckpointSummary]:
        """Committed checkpoints of ``scope`` (optionally of one attempt), newest first."""
        from ..summary import summarize

        out: list[CheckpointSummary] = []
        for cid in self.committed_ids(scope):
            try:
                key, hexdigest = self.read_pointer(scope, cid)
                data = self.read_bytes(scope, key, RECORD_SIZE_CAP)
                record = parse_record(data)
            except (ObjectMissing, StoreError, ValueError, RecordRefused):
                continue
            if execution_id is not None and record.authority.execution_id != execution_id:
                continue
            intact = digest_of_bytes(data) == "sha256:" + hexdigest and record.checkpoint_id == cid
            out.append(summarize(self, scope, record, intact=intact))
        out.sort(key=lambda s: (s.checkpoint_sequence, s.created_at), reverse=True)
        return out
