"""``capture()``: build a checkpoint, upload its objects, verify them, then commit the record.

Order matters for crashes: objects first (content-addressed, harmless if
orphaned), then verification through the store, then the manifest, then the
write-once commit pointer. A process killed anywhere before the pointer leaves
nothing that lists or verifies as a checkpoint.

``known`` makes a series of captures cheaper: the digests this worker uploaded
and verified before, each with the identity the store gave it then. An artifact
whose bytes hash to one of them, and whose stored object still has that
identity, is neither uploaded nor read back again (the source bundle, the patch
and the untracked files of a turn that changed none of them). Anything else,
or a store that gives no identity, is uploaded and verified as always; the
record lists every object either way, so each checkpoint stays self-contained.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from agentihooks_checkpoint.archive import ArchiveRefused, build_archive, safe_member_name
from agentihooks_checkpoint.checks import InventoryItem
from agentihooks_checkpoint.errors import CaptureError, StoreError
from agentihooks_checkpoint.hashing import digest_of_file
from agentihooks_checkpoint.layout import object_key
from agentihooks_checkpoint.model import (
    SEGMENTED_VERSION,
    WRITTEN_VERSION,
    ArtifactEntry,
    Authority,
    CheckpointRecord,
    Cursor,
    Role,
    missing_written_fields,
)
from agentihooks_checkpoint.record import encode_record
from agentihooks_checkpoint.stores.base import CheckpointStore
from agentihooks_checkpoint.validator import Validator

from . import git
from .request import CaptureRequest
from .segments import Chain, Segmented, segmented

Step = Callable[[str], None]
#: Most objects a worker remembers having uploaded (the oldest are forgotten first).
KNOWN_CAP = 256


@dataclass(frozen=True)
class CaptureResult:
    """A committed checkpoint: its record and the sha256 (bare hex) of the manifest bytes."""

    record: CheckpointRecord
    manifest_sha256: str


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _native_files(req: CaptureRequest) -> list[tuple[Path, str]]:
    if not req.native_files:
        return []
    if req.harness_home is None or req.native_session_id is None:
        raise CaptureError("native session files need the harness home and the session id")
    home = req.harness_home.resolve()
    out: list[tuple[Path, str]] = []
    for name in req.native_files:
        try:
            rel = safe_member_name(name)
        except ArchiveRefused as e:
            raise CaptureError("a native session file is not relative to the harness home") from e
        src = home.joinpath(*rel.parts)
        if src.is_symlink() or not src.is_file():
            raise CaptureError("a native session file is missing or not a regular file")
        out.append((src, rel.as_posix()))
    return out


def _stage(
    req: CaptureRequest, work: Path, *, session: bool = True
) -> tuple[dict[str, Path], list[str], str, str, str]:
    """Build every artifact file under ``work`` (the transcript and native session only with
    ``session``: else they are segments); return (role → file, exclusions, base, head, branch)."""
    files: dict[str, Path] = {}
    exclusions = list(req.exclusions)
    if session:
        transcript = work / "transcript.jsonl"
        try:
            transcript.touch(mode=0o600)
            shutil.copyfile(req.transcript, transcript)  # bytes unchanged
        except OSError as e:
            raise CaptureError("the transcript cannot be read") from e
        files[Role.TRANSCRIPT] = transcript
        native = _native_files(req)
        if native:
            build_archive(work / "native_session.tar", native)
            files[Role.NATIVE_SESSION] = work / "native_session.tar"
    head = git.head_commit(req.worktree)
    branch = req.branch_name or git.current_branch(req.worktree)
    base = req.base_commit or head
    git.check_range(req.worktree, base, head, branch)
    if base != head:
        git.write_bundle(req.worktree, base, branch, work / "source.bundle")
        files[Role.GIT_BUNDLE] = work / "source.bundle"
    if git.write_patch(req.worktree, work / "source.patch") > 0:
        files[Role.SOURCE_PATCH] = work / "source.patch"
    untracked: list[tuple[Path, str]] = []
    for rel in git.untracked_files(req.worktree):
        src = req.worktree / rel
        if src.is_symlink() or not src.is_file():
            exclusions.append(f"untracked non-regular file skipped: {rel}")
            continue
        untracked.append((src, rel))
    if untracked:
        build_archive(work / "untracked.tar", untracked)
        files[Role.UNTRACKED] = work / "untracked.tar"
    return files, exclusions, base, head, branch


_PATHS = {
    Role.TRANSCRIPT: "transcript.jsonl",
    Role.NATIVE_SESSION: "native_session.tar",
    Role.GIT_BUNDLE: "source.bundle",
    Role.SOURCE_PATCH: "source.patch",
    Role.UNTRACKED: "untracked.tar",
}


def capture(
    store: CheckpointStore,
    req: CaptureRequest,
    *,
    work_dir: Path | None = None,
    on_step: Step | None = None,
    known: dict[str, str] | None = None,
    chain: Chain | None = None,
    segments: bool = False,
) -> CaptureResult:
    """Capture and commit one checkpoint; raise :class:`CaptureError` and commit nothing on failure.

    ``on_step`` is called after each durable step (``uploaded:<role>``,
    ``verified``, ``manifest_written``, ``committed``); tests kill the process there.
    ``chain`` is what this attempt stored of its transcript before (:mod:`.segments`); with
    ``segments`` the transcript and native session are sent as what they gained since, where they
    only grew. The chain is moved on only once the checkpoint is committed.
    """
    step = on_step or (lambda _s: None)
    started = _now()
    if store.is_committed(req.scope, req.checkpoint_id):
        raise CaptureError("this checkpoint is already committed")
    work = Path(tempfile.mkdtemp(prefix="capture-", dir=work_dir))
    try:
        sent: list[InventoryItem] = []

        def send(path: Path, role: str = "segment") -> tuple[str, int]:
            path.chmod(0o600)  # conversation content stays private even in the work folder
            try:
                obj = _reused(store, req, path, known) or store.put_object(req.scope, path)
            except (StoreError, OSError) as e:
                raise CaptureError(f"uploading the {role} artifact failed") from e
            if not isinstance(obj, _Reused):
                sent.append(InventoryItem(role, path.name, obj.size, obj.digest))
            return obj.digest, obj.size

        seg: Segmented | None = None
        try:
            if chain is not None and segments:
                seg = segmented(req.transcript, _native_files(req), chain, work, send)
            files, exclusions, base, head, branch = _stage(req, work, session=seg is None)
        except (OSError, ArchiveRefused) as e:
            raise CaptureError("the capture inputs could not be read or archived") from e
        entries: list[ArtifactEntry] = []
        if seg is not None:
            entries += seg.entries
            for made in seg.entries:
                step(f"uploaded:{made.role}")
        for role, path in files.items():
            digest, size = send(path, role)
            entries.append(ArtifactEntry(role=role, path=_PATHS[Role(role)], size=size, digest=digest))
            step(f"uploaded:{role}")
        reason, _ = Validator().verify_objects(store, req.scope, sent)
        if reason is not None:
            raise CaptureError(f"the uploaded objects did not verify: {reason.value}")
        if known is not None:
            _remember(store, req, sent, known)
        step("verified")
        record = _record(req, entries, exclusions, (base, head, branch), started, seg=seg)
        data = encode_record(record)
        try:
            store.write_manifest(req.scope, req.checkpoint_id, data)
            step("manifest_written")
            digest = store.commit_written(req.scope, req.checkpoint_id, data)
        except StoreError as e:
            raise CaptureError(f"committing the checkpoint failed: {e}") from e
        step("committed")
        if chain is not None:
            _move_on(chain, req, seg, entries)
        return CaptureResult(record=record, manifest_sha256=digest)
    finally:
        shutil.rmtree(work, ignore_errors=True)


@dataclass(frozen=True)
class _Reused:
    digest: str
    size: int


def _reused(
    store: CheckpointStore, req: CaptureRequest, path: Path, known: dict[str, str] | None
) -> _Reused | None:
    """The stored object with ``path``'s bytes, when this worker verified it and it is unchanged."""
    if not known:
        return None
    digest, size = digest_of_file(path)
    expected = known.get(digest)
    if expected is None or store.identity(req.scope, object_key(digest)) != expected:
        return None
    return _Reused(digest, size)


def _move_on(chain: Chain, req: CaptureRequest, seg: Segmented | None, entries: list[ArtifactEntry]) -> None:
    """The chain after a committed capture: the segments it listed, or the whole transcript it sent."""
    if seg is not None:
        chain.source, chain.length, chain.prefix, chain.parts = (
            seg.chain.source, seg.chain.length, seg.chain.prefix, seg.chain.parts
        )  # fmt: skip
        return
    transcript = next(e for e in entries if e.role == Role.TRANSCRIPT)
    chain.restart(req.transcript, transcript.digest, transcript.size)


def _remember(
    store: CheckpointStore, req: CaptureRequest, sent: list[InventoryItem], known: dict[str, str]
) -> None:
    """The identities of the objects just uploaded and verified (a store without identities: none)."""
    for e in sent:
        ident = store.identity(req.scope, object_key(e.digest))
        if ident is not None:
            known[e.digest] = ident
    while len(known) > KNOWN_CAP:
        known.pop(next(iter(known)))


def _record(
    req: CaptureRequest,
    entries: list[ArtifactEntry],
    exclusions: list[str],
    source: tuple[str, str, str],
    started: str,
    *,
    seg: Segmented | None = None,
) -> CheckpointRecord:
    base, head, branch = source
    native = any(e.role == Role.NATIVE_SESSION for e in entries)
    offset = req.transcript_byte_offset
    if offset is None:
        offset = seg.chain.length if seg is not None else req.transcript.stat().st_size
    authority = Authority(
        execution_id=req.execution_id,
        task_id=req.scope.task_id,
        task_generation=req.scope.task_generation,
        project_id=req.project_id,
        execution_generation=req.execution_generation,
        swarm_id=req.scope.swarm,
        **({"seat_id": req.seat_id} if req.seat_id else {}),
        **({"controller_epoch": req.controller_epoch} if req.controller_epoch is not None else {}),
    )
    now = _now()
    fields: dict[str, object] = {
        "schema_version": WRITTEN_VERSION if seg is None else SEGMENTED_VERSION,
        "operation_id": req.operation_id or req.checkpoint_id,
        "authority": authority,
        "checkpoint_id": req.checkpoint_id,
        "checkpoint_sequence": req.checkpoint_sequence,
        "status": "complete",
        "created_at": started,
        "committed_at": now,
        "native_resume_capability": "qualified" if native else "unsupported",
        "base_commit": base,
        "head_commit": head,
        "branch_name": branch,
        "transcript_durable_cursor": Cursor(sequence=req.watermark, byte_offset=offset),
        "artifact_hashes": {e.role: e.digest for e in entries},
        "exclusions": exclusions,
        "quiescence_method": req.quiescence_method,
        "dependencies_manifest": {},
        "restore_constraints": req.restore_constraints,
        "native_session_id": req.native_session_id,
        "compatibility_key": req.compatibility_key,
        "harness": req.harness,
        "artifacts": entries,
    }
    if req.native_harness_version:
        fields["native_harness_version"] = req.native_harness_version
    if seg is not None:
        fields["segments"] = seg.segments
    record = CheckpointRecord.model_validate(fields)
    missing = missing_written_fields(record)
    if missing:  # a reader takes them as optional; a record of this package always carries them
        raise CaptureError(f"the record would lack {', '.join(missing)}")
    return record
