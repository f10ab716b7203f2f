"""Every verification reason, each produced by a real scenario on a real local store."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agentihooks_checkpoint.layout import object_key, pointer_key
from agentihooks_checkpoint.reasons import VERIFY_REASONS, Reason
from agentihooks_checkpoint.record import RECORD_SIZE_CAP
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores import LocalStore
from agentihooks_checkpoint.validator import Validator
from testsupport.checkpoints import BuiltCheckpoint, build_checkpoint, edit_record, recommit, store_path

SCOPE = StoreScope(swarm="swarm-a", task_id="task-1", task_generation=1)
SEEN: set[Reason] = set()


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "store")


@pytest.fixture
def built(store: LocalStore, tmp_path: Path) -> BuiltCheckpoint:
    return build_checkpoint(store, SCOPE, tmp_path / "w", kind="claude", checkpoint_id="ckpt-7", sequence=7)


def verify(store: LocalStore, b: BuiltCheckpoint, **kw: Any) -> str:
    args: dict[str, Any] = {"execution_id": b.execution_id, "execution_generation": b.execution_generation}
    args.update(kw)
    cid = args.pop("checkpoint_id", b.checkpoint_id)
    scope = args.pop("scope", SCOPE)
    verdict = Validator().verify(store, scope, cid, **args)
    if verdict.reason is not None:
        SEEN.add(verdict.reason)
    return str(verdict)


def obj(store: LocalStore, b: BuiltCheckpoint, role: str) -> Path:
    return store_path(store, SCOPE, object_key(b.record.artifact_hashes[role]))


def test_fixture_checkpoint_verifies(store: LocalStore, built: BuiltCheckpoint) -> None:
    assert verify(store, built) == "ok"


def test_manifest_absent(store: LocalStore, built: BuiltCheckpoint) -> None:
    assert verify(store, built, checkpoint_id="ckpt-unknown") == "manifest_absent"
    assert verify(store, built, checkpoint_id="../ckpt-7") == "manifest_absent"
    store_path(store, SCOPE, store.read_pointer(SCOPE, "ckpt-7")[0]).unlink()
    assert verify(store, built) == "manifest_absent"


def test_uncommitted_manifest_is_absent(store: LocalStore, built: BuiltCheckpoint) -> None:
    store_path(store, SCOPE, pointer_key("ckpt-7")).unlink()
    assert verify(store, built) == "manifest_absent"
    assert store.list_checkpoints(SCOPE) == []


def test_corrupt_manifest(store: LocalStore, built: BuiltCheckpoint) -> None:
    path = store_path(store, SCOPE, store.read_pointer(SCOPE, "ckpt-7")[0])
    data = bytearray(path.read_bytes())
    data[10] ^= 0x01
    path.write_bytes(bytes(data))
    assert verify(store, built) == "corrupt_manifest"


def test_corrupt_pointer_is_corrupt_manifest(store: LocalStore, built: BuiltCheckpoint) -> None:
    store_path(store, SCOPE, pointer_key("ckpt-7")).write_bytes(b"garbage")
    assert verify(store, built) == "corrupt_manifest"
    store_path(store, SCOPE, pointer_key("ckpt-7")).write_text(
        json.dumps({"manifest": "checkpoints/other/manifest.json", "sha256": "0" * 64})
    )
    assert verify(store, built) == "corrupt_manifest"


def test_missing_object(store: LocalStore, built: BuiltCheckpoint) -> None:
    obj(store, built, "git_bundle").unlink()
    assert verify(store, built) == "missing_object"


@pytest.mark.parametrize("role", ["transcript", "native_session", "git_bundle", "source_patch", "untracked"])
def test_corrupt_object(store: LocalStore, built: BuiltCheckpoint, role: str) -> None:
    path = obj(store, built, role)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40
    path.write_bytes(bytes(data))
    assert verify(store, built) == "corrupt_object"


def test_truncated_and_extended_objects_are_corrupt(store: LocalStore, built: BuiltCheckpoint) -> None:
    path = obj(store, built, "transcript")
    original = path.read_bytes()
    path.write_bytes(original[:-1])
    assert verify(store, built) == "corrupt_object"
    path.write_bytes(original + b"more")
    assert verify(store, built) == "corrupt_object"


def put_bytes(store: LocalStore, data: bytes) -> str:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    store.write_bytes(SCOPE, object_key(digest), data)
    return digest


def replace_role(rec: dict[str, Any], role: str, digest: str, size: int) -> None:
    rec["artifact_hashes"][role] = digest
    for e in rec["artifacts"]:
        if e["role"] == role:
            e["digest"], e["size"] = digest, size


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "dotdot", "absolute"])
def test_hostile_archive_with_a_matching_hash_is_corrupt_object(
    store: LocalStore, built: BuiltCheckpoint, kind: str
) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        m = tarfile.TarInfo({"dotdot": "../../evil", "absolute": "/tmp/evil"}.get(kind, "link"))
        if kind == "symlink":
            m.type, m.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(m)
        elif kind == "hardlink":
            m.type, m.linkname = tarfile.LNKTYPE, "/etc/passwd"
            tar.addfile(m)
        else:
            m.size = 4
            tar.addfile(m, io.BytesIO(b"evil"))
    data = buf.getvalue()
    digest = put_bytes(store, data)
    edit_record(store, SCOPE, "ckpt-7", lambda r: replace_role(r, "native_session", digest, len(data)))
    assert verify(store, built) == "corrupt_object"


@pytest.mark.parametrize("size", [0, 1, "bigger"])
def test_sizes_that_lie_are_corrupt_objects(store: LocalStore, built: BuiltCheckpoint, size: Any) -> None:
    def lie(r: dict[str, Any]) -> None:
        e = r["artifacts"][0]
        e["size"] = e["size"] + 1 if size == "bigger" else size

    edit_record(store, SCOPE, "ckpt-7", lie)
    assert verify(store, built) == "corrupt_object"


@pytest.mark.parametrize("version", ["3.0", "1.9", "20.1"])
def test_unsupported_version(store: LocalStore, built: BuiltCheckpoint, version: str) -> None:
    edit_record(store, SCOPE, "ckpt-7", lambda r: r.update(schema_version=version))
    assert verify(store, built) == "unsupported_version"


HOSTILE: dict[str, Callable[[dict[str, Any]], None]] = {
    "wrong type": lambda r: r.update(checkpoint_sequence="7"),
    "dotdot path": lambda r: r["artifacts"][0].update(path="../../etc/cron.d/x"),
    "absolute path": lambda r: r["artifacts"][0].update(path="/etc/passwd"),
    "authority at top": lambda r: r.update(task_id="task-1"),
    "open authority": lambda r: r["authority"].update(admin=True),
    "bad minor": lambda r: r.update(schema_version="2.02"),
    "negative size": lambda r: r["artifacts"][0].update(size=-1),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_invalid_record(store: LocalStore, built: BuiltCheckpoint, name: str) -> None:
    edit_record(store, SCOPE, "ckpt-7", HOSTILE[name])
    assert verify(store, built) == "invalid_record"


@pytest.mark.parametrize(
    "data",
    [b"not json at all", b"\xff\xfe\x00", b"[1, 2]", b'{"schema_version": "2.2", "schema_version": "2.2"}'],
)
def test_non_json_records_are_invalid(store: LocalStore, built: BuiltCheckpoint, data: bytes) -> None:
    recommit(store, SCOPE, "ckpt-7", data)
    assert verify(store, built) == "invalid_record"


def test_oversized_record_is_refused_unread(store: LocalStore, built: BuiltCheckpoint) -> None:
    recommit(store, SCOPE, "ckpt-7", b" " * (RECORD_SIZE_CAP + 10) + b"{}")
    assert verify(store, built) == "invalid_record"


@pytest.mark.parametrize(
    "edit",
    [
        lambda r: r.update(status="uploading"),
        lambda r: r.update(committed_at=None),
        lambda r: r.update(status="rejected"),
    ],
)
def test_not_committed(
    store: LocalStore, built: BuiltCheckpoint, edit: Callable[[dict[str, Any]], None]
) -> None:
    edit_record(store, SCOPE, "ckpt-7", edit)
    assert verify(store, built) == "not_committed"


def drop_role(role: str) -> Callable[[dict[str, Any]], None]:
    def edit(r: dict[str, Any]) -> None:
        del r["artifact_hashes"][role]
        r["artifacts"] = [e for e in r["artifacts"] if e["role"] != role]

    return edit


@pytest.mark.parametrize("role", ["transcript", "native_session", "git_bundle"])
def test_missing_material(store: LocalStore, built: BuiltCheckpoint, role: str) -> None:
    edit_record(store, SCOPE, "ckpt-7", drop_role(role))
    assert verify(store, built) == "missing_material"


@pytest.mark.parametrize("cursor", [None, {}, {"byte_offset": 10}])
def test_missing_watermark(store: LocalStore, built: BuiltCheckpoint, cursor: Any) -> None:
    edit_record(store, SCOPE, "ckpt-7", lambda r: r.update(transcript_durable_cursor=cursor))
    assert verify(store, built) == "missing_watermark"


def dup_role(r: dict[str, Any]) -> None:
    r["artifacts"].append({**r["artifacts"][0], "path": "again.jsonl"})


def other_digest(r: dict[str, Any]) -> None:
    r["artifact_hashes"]["transcript"] = "sha256:" + "0" * 64


def extra_inventory_role(r: dict[str, Any]) -> None:
    r["artifacts"].append({**r["artifacts"][0], "role": "extra", "path": "extra"})


def nested_paths(r: dict[str, Any]) -> None:
    r["artifacts"][0]["path"] = "a"
    r["artifacts"][1]["path"] = "a/b"


def dup_path(r: dict[str, Any]) -> None:
    r["artifacts"][1]["path"] = r["artifacts"][0]["path"]


@pytest.mark.parametrize("edit", [dup_role, other_digest, extra_inventory_role, nested_paths, dup_path])
def test_inventory_mismatch(
    store: LocalStore, built: BuiltCheckpoint, edit: Callable[[dict[str, Any]], None]
) -> None:
    edit_record(store, SCOPE, "ckpt-7", edit)
    assert verify(store, built) == "inventory_mismatch"


def test_scope_mismatch(store: LocalStore, built: BuiltCheckpoint) -> None:
    assert verify(store, built, execution_generation=2) == "scope_mismatch"
    edit_record(store, SCOPE, "ckpt-7", lambda r: r["authority"].update(task_generation=2))
    assert verify(store, built) == "scope_mismatch"
    edit_record(store, SCOPE, "ckpt-7", lambda r: r["authority"].update(task_generation=1, task_id="task-2"))
    assert verify(store, built) == "scope_mismatch"


def test_identity_mismatch(store: LocalStore, built: BuiltCheckpoint) -> None:
    assert verify(store, built, execution_id="exe-" + "0" * 32) == "identity_mismatch"
    data = store.read_bytes(SCOPE, store.read_pointer(SCOPE, "ckpt-7")[0], 1 << 20)
    store.write_manifest(SCOPE, "ckpt-8", data)
    store.commit_written(SCOPE, "ckpt-8", data)
    assert verify(store, built, checkpoint_id="ckpt-8") == "identity_mismatch"


@pytest.mark.parametrize("minor", [0, 1])
def test_legacy_record_validates_with_task_generation(store: LocalStore, tmp_path: Path, minor: int) -> None:
    transcript = put_bytes(store, b'{"a": 1}\n')
    rec: dict[str, Any] = {
        "schema_version": f"2.{minor}",
        "operation_id": "op-1",
        "authority": {
            "execution_id": "exe-old",
            "task_id": "task-1",
            "task_generation": 1,
            "project_id": "unknown",
        },
        "checkpoint_id": "ckpt-old",
        "checkpoint_sequence": 3,
        "status": "complete",
        "created_at": "2026-01-01T00:00:00Z",
        "committed_at": "2026-01-01T00:00:01Z",
        "native_resume_capability": "unsupported",
        "base_commit": "a" * 40,
        "head_commit": "a" * 40,
        "branch_name": "main",
        "transcript_durable_cursor": {"sequence": 9},
        "artifact_hashes": {"transcript": transcript},
        "exclusions": [],
    }
    if minor == 1:
        rec.update(quiescence_method="stopped_process", dependencies_manifest={}, restore_constraints=[])
    recommit(store, SCOPE, "ckpt-old", json.dumps(rec).encode())
    v = Validator()
    ok = v.verify(
        store, SCOPE, "ckpt-old", execution_id="exe-old", execution_generation=1, stage_dir=tmp_path / "s"
    )
    assert ok.ok
    assert ok.staged is not None and ok.staged.artifacts["transcript"].path.read_bytes() == b'{"a": 1}\n'
    assert (
        str(v.verify(store, SCOPE, "ckpt-old", execution_id="exe-old", execution_generation=2))
        == "scope_mismatch"
    )
    [summary] = store.list_checkpoints(SCOPE)
    assert summary.complete and summary.execution_generation == 1 and summary.watermark == 9


def test_store_unreachable(built: BuiltCheckpoint) -> None:
    """Nobody answers at the controller's address: its own reason, never ``manifest_absent``."""
    import socket

    from agentihooks_checkpoint.stores.remote import RemoteStore

    with socket.socket() as s:  # bound, never listening: connections are refused
        s.bind(("127.0.0.1", 0))
        remote = RemoteStore(f"http://127.0.0.1:{s.getsockname()[1]}", "exe-x", "token", retry_seconds=0.5)
        assert verify(remote, built) == "store_unreachable"  # type: ignore[arg-type]


def test_every_verify_reason_was_produced() -> None:
    """Runs last in this module: each reason above came from a real scenario."""
    assert set(VERIFY_REASONS) == SEEN
