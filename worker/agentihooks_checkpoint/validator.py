"""``Validator.verify``: is this checkpoint authoritative, and what exactly may be restored from it.

Order of checks: the commit pointer and the manifest's stored hash, the record
(version, schema), scope and identity, commit state, material, watermark and
inventory, then every object: streamed once through sha256, size-capped at its
declared size, archives checked member by member (types, names, and the
:class:`~.archive.ArchiveLimits`: member count, and an expanded size bounded by
the archive's declared size and an absolute cap), optionally copied to a stage
folder as it is hashed (archives either as the tar itself or, with
``unpack_archives``, as their member files, so a restore can move them into
place instead of copying them out of the tar). The first failure is the
verdict's one reason. An archive refusal also sets ``Verdict.detail``, naming
the member to blame, for the worker's log.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from .archive import ArchiveLimits, ArchiveRefused, check_stream, shown, unpack_stream
from .chain import Chain, HashingReader, PartCorrupt, Prefetch
from .checks import InventoryItem, check_attempt, check_content, check_scope
from .errors import ObjectMissing, RecordRefused, StoreError, StoreUnreachable
from .layout import object_key, pointer_key
from .model import ARCHIVE_ROLES, CheckpointRecord
from .reasons import Reason
from .record import RECORD_SIZE_CAP, parse_record
from .scope import StoreScope
from .stores.base import CheckpointStore
from .verdict import StagedArtifact, StagedCheckpoint, Verdict


class Validator:
    """Verifies checkpoints. Stateless; one instance can serve many calls."""

    def __init__(
        self, *, record_cap: int = RECORD_SIZE_CAP, archive_limits: ArchiveLimits | None = None
    ) -> None:
        self.record_cap = record_cap
        self.archive_limits = archive_limits or ArchiveLimits()

    def verify(
        self,
        store: CheckpointStore,
        scope: StoreScope,
        checkpoint_id: str,
        *,
        execution_id: str,
        execution_generation: int,
        stage_dir: Path | None = None,
        unpack_archives: bool = False,
    ) -> Verdict:
        """Verify ``checkpoint_id`` captured by attempt (``execution_id``, ``execution_generation``).

        With ``stage_dir`` (created 0700, must be empty), every verified object
        is left there (0600) and ``verdict.staged`` points at the copies; on a
        refusal nothing is left behind. With ``unpack_archives`` an archive
        role is staged as its regular member files (``StagedArtifact.members``)
        instead of as the tar.
        """
        try:
            record = self._read_record(store, scope, checkpoint_id)
            check_scope(record, scope)
            check_attempt(
                record,
                checkpoint_id=checkpoint_id,
                execution_id=execution_id,
                execution_generation=execution_generation,
            )
            items = check_content(record)
        except RecordRefused as r:
            return Verdict.refused(r.reason)
        reason, detail, staged = self._verify_objects(
            store, scope, items, stage_dir, unpack_archives=unpack_archives
        )
        if reason is not None:
            return Verdict.refused(reason, detail)
        return Verdict(reason=None, record=record, staged=staged)

    def listed_keys(self, store: CheckpointStore, scope: StoreScope, checkpoint_id: str) -> list[str] | None:
        """Every stored key a verification of ``checkpoint_id`` reads (its pointer, its record, each
        listed object), or ``None`` when its record cannot be read or listed (a verification says why)."""
        try:
            record_key, _ = store.read_pointer(scope, checkpoint_id)
            items = check_content(self._read_record(store, scope, checkpoint_id))
            objects = dict.fromkeys(object_key(d) for i in items for d, _ in i.objects)
            return [pointer_key(checkpoint_id), record_key, *objects]
        except (RecordRefused, StoreError, ValueError):
            return None

    def _read_record(self, store: CheckpointStore, scope: StoreScope, checkpoint_id: str) -> CheckpointRecord:
        try:
            pointer_key(checkpoint_id)
        except ValueError as e:
            raise RecordRefused(Reason.MANIFEST_ABSENT) from e
        try:
            key, hexdigest = store.read_pointer(scope, checkpoint_id)
        except StoreUnreachable as e:  # no answer: nothing is known about the checkpoint
            raise RecordRefused(Reason.STORE_UNREACHABLE) from e
        except StoreError as e:  # absent (or unreadable): no record to trust
            raise RecordRefused(Reason.MANIFEST_ABSENT) from e
        except ValueError as e:
            raise RecordRefused(Reason.CORRUPT_MANIFEST) from e
        try:
            size = store.size_of(scope, key)
        except StoreUnreachable as e:
            raise RecordRefused(Reason.STORE_UNREACHABLE) from e
        except StoreError as e:
            raise RecordRefused(Reason.MANIFEST_ABSENT) from e
        if size is None:
            raise RecordRefused(Reason.MANIFEST_ABSENT)
        if size > self.record_cap:
            raise RecordRefused(Reason.INVALID_RECORD, "record exceeds the size cap")
        try:
            data = store.read_bytes(scope, key, self.record_cap)
        except StoreUnreachable as e:
            raise RecordRefused(Reason.STORE_UNREACHABLE) from e
        except StoreError as e:
            raise RecordRefused(Reason.MANIFEST_ABSENT) from e
        except ValueError as e:
            raise RecordRefused(Reason.INVALID_RECORD, "record exceeds the size cap") from e
        if hashlib.sha256(data).hexdigest() != hexdigest:
            raise RecordRefused(Reason.CORRUPT_MANIFEST)
        return parse_record(data)

    def verify_objects(
        self,
        store: CheckpointStore,
        scope: StoreScope,
        items: list[InventoryItem],
        stage_dir: Path | None = None,
        *,
        unpack_archives: bool = False,
    ) -> tuple[Reason | None, StagedCheckpoint | None]:
        """Hash every listed object (concurrently when the store allows); first failure wins."""
        reason, _, staged = self._verify_objects(
            store, scope, items, stage_dir, unpack_archives=unpack_archives
        )
        return reason, staged

    def _verify_objects(
        self,
        store: CheckpointStore,
        scope: StoreScope,
        items: list[InventoryItem],
        stage_dir: Path | None = None,
        *,
        unpack_archives: bool = False,
    ) -> tuple[Reason | None, str, StagedCheckpoint | None]:
        """:meth:`verify_objects`, plus the first failure's detail (an archive refusal's text)."""
        if stage_dir is not None:
            stage_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(stage_dir, 0o700)
            if any(stage_dir.iterdir()):
                raise ValueError("the stage folder must be empty")
        limits = self.archive_limits
        prefetch = Prefetch(store, scope)

        def check(item: InventoryItem) -> _Checked:
            return _check_object(
                store,
                scope,
                item,
                stage_dir,
                unpack_archives=unpack_archives,
                limits=limits,
                prefetch=prefetch,
            )

        workers = max(1, min(store.max_concurrency, len(items)))
        try:
            if workers > 1:
                with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="verify") as pool:
                    results = list(pool.map(check, items))
            else:
                results = [check(i) for i in items]
        finally:
            prefetch.close()
        for result in results:
            if result.reason is not None:
                if stage_dir is not None:
                    _empty(stage_dir)
                return result.reason, result.detail, None
        if stage_dir is None:
            return None, "", None
        staged = {r.staged.role: r.staged for r in results if r.staged is not None}
        return None, "", StagedCheckpoint(directory=stage_dir, artifacts=staged)


@dataclass(frozen=True)
class _Checked:
    reason: Reason | None
    staged: StagedArtifact | None = None
    detail: str = ""


def _check_object(
    store: CheckpointStore,
    scope: StoreScope,
    item: InventoryItem,
    stage_dir: Path | None,
    *,
    unpack_archives: bool,
    limits: ArchiveLimits,
    prefetch: Prefetch,
) -> _Checked:
    limit = None if item.size is None else item.size + 1
    target: Path | None = None
    out: BinaryIO | None = None
    refusal: ArchiveRefused | None = None
    unpack = unpack_archives and item.role in ARCHIVE_ROLES
    members: dict[str, Path] | None = None
    try:
        if stage_dir is not None:
            target = stage_dir.joinpath(*item.path.split("/"))
            _mkdirs_in(stage_dir, target.parent)
            if unpack:  # the member files are kept, not the tar: a folder named after the object
                target.mkdir(mode=0o700)
            else:
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                out = os.fdopen(fd, "wb", buffering=1 << 20)
        opened: contextlib.AbstractContextManager[Any] = (
            store.open_read(scope, object_key(item.digest))
            if item.parts is None
            else Chain(store, scope, item.parts, prefetch)
        )
        with opened as src:
            reader = HashingReader(src, out, limit)
            if item.role in ARCHIVE_ROLES:
                # The archive's declared size bounds what its members may expand to.
                try:
                    if unpack and target is not None:
                        members = unpack_stream(reader, target, limits, declared=item.size)  # type: ignore[arg-type]
                    else:
                        check_stream(reader, limits, declared=item.size)  # type: ignore[arg-type]
                except ArchiveRefused as e:
                    refusal = e
            reader.drain()
    except PartCorrupt:
        return _Checked(Reason.CORRUPT_OBJECT, detail=f"{item.role}: a segment does not match its digest")
    except ObjectMissing:
        return _Checked(Reason.MISSING_OBJECT)
    except StoreUnreachable:
        return _Checked(Reason.STORE_UNREACHABLE)
    except (StoreError, OSError):
        return _Checked(Reason.MISSING_OBJECT)
    finally:
        if out is not None:
            out.close()
    digest = "sha256:" + reader.sha.hexdigest()
    if digest != item.digest or (item.size is not None and reader.count != item.size):
        return _Checked(Reason.CORRUPT_OBJECT)
    if refusal is not None:
        return _Checked(Reason.CORRUPT_OBJECT, detail=f"{item.role}: {_unnamed(refusal)}")
    if target is None:
        return _Checked(None)
    return _Checked(
        None, StagedArtifact(role=item.role, path=target, size=reader.count, digest=digest, members=members)
    )


def _unnamed(refusal: ArchiveRefused) -> str:
    """The archive refusal without the member's name: a verdict names no record values or paths."""
    text = str(refusal)
    if refusal.member is not None:
        text = text.replace(" " + shown(refusal.member), "")
    return text


def _mkdirs_in(root: Path, folder: Path) -> None:
    rel = folder.relative_to(root)
    cur = root
    for part in rel.parts:
        cur = cur / part
        if cur.is_symlink():
            raise OSError("symlink in stage folder")
        if not cur.exists():
            cur.mkdir(mode=0o700)


def _empty(folder: Path) -> None:
    for child in folder.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
