"""S3 (moto server through real boto3) and the catalog listing on both stores."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from agentihooks_checkpoint.catalog import newest_compatible
from agentihooks_checkpoint.errors import CheckpointExists
from agentihooks_checkpoint.layout import object_key, pointer_key
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores import LocalStore, S3Store, store_from_env
from agentihooks_checkpoint.stores.base import CheckpointStore
from agentihooks_checkpoint.validator import Validator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from testsupport.checkpoints import build_checkpoint, edit_record

SCOPE = StoreScope(swarm="swarm-a", task_id="task-1", task_generation=1)


@pytest.fixture
def s3_store(s3_endpoint: str, s3_bucket: str) -> S3Store:
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    store = store_from_env(
        {"AGENTIHOOKS_CHECKPOINT_BUCKET": s3_bucket, "AGENTIHOOKS_CHECKPOINT_PREFIX": "ckpts"},
        s3_client=client,
    )
    assert isinstance(store, S3Store)
    return store


@pytest.fixture(params=["local", "s3"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> CheckpointStore:
    if request.param == "local":
        return LocalStore(tmp_path / "store")
    store: S3Store = request.getfixturevalue("s3_store")
    return store


def s3_delete(store: S3Store, key: str) -> None:
    store.client.delete_object(Bucket=store.bucket, Key=f"{store.prefix}{SCOPE.prefix}{key}")


def s3_put(store: S3Store, key: str, data: bytes) -> None:
    store.client.put_object(Bucket=store.bucket, Key=f"{store.prefix}{SCOPE.prefix}{key}", Body=data)


def test_s3_capture_verify_and_stage(s3_store: S3Store, tmp_path: Path) -> None:
    b = build_checkpoint(s3_store, SCOPE, tmp_path / "w", kind="codex")
    keys = s3_store.client.list_objects_v2(Bucket=s3_store.bucket)["Contents"]
    assert all(k["Key"].startswith("ckpts/swarms/swarm-a/tasks/task-1/gen-1/") for k in keys)
    v = Validator().verify(
        s3_store,
        SCOPE,
        b.checkpoint_id,
        execution_id=b.execution_id,
        execution_generation=1,
        stage_dir=tmp_path / "st",
    )
    assert v.ok and v.staged is not None
    assert v.staged.artifacts["transcript"].path.read_bytes() == b.transcript.read_bytes()


def test_s3_reasons(s3_store: S3Store, tmp_path: Path) -> None:
    b = build_checkpoint(s3_store, SCOPE, tmp_path / "w", kind="claude")

    def verdict() -> str:
        v = Validator().verify(
            s3_store, SCOPE, b.checkpoint_id, execution_id=b.execution_id, execution_generation=1
        )
        return str(v)

    assert verdict() == "ok"
    key = object_key(b.record.artifact_hashes["native_session"])
    original = s3_store.read_bytes(SCOPE, key, 1 << 20)
    s3_put(s3_store, key, original[:-1] + bytes([original[-1] ^ 1]))
    assert verdict() == "corrupt_object"
    s3_delete(s3_store, key)
    assert verdict() == "missing_object"
    s3_put(s3_store, key, original)
    manifest = s3_store.read_pointer(SCOPE, b.checkpoint_id)[0]
    data = s3_store.read_bytes(SCOPE, manifest, 1 << 20)
    s3_put(s3_store, manifest, data.replace(b'"complete"', b'"complexe"'))
    assert verdict() == "corrupt_manifest"
    s3_put(s3_store, manifest, data)
    edit_record(s3_store, SCOPE, b.checkpoint_id, lambda r: r.update(schema_version="4.0"))
    assert verdict() == "unsupported_version"
    s3_delete(s3_store, pointer_key(b.checkpoint_id))
    assert verdict() == "manifest_absent"


def test_s3_commit_is_write_once(s3_store: S3Store) -> None:
    s3_store.write_once(SCOPE, pointer_key("c"), b"{}")
    with pytest.raises(CheckpointExists):
        s3_store.write_once(SCOPE, pointer_key("c"), b"{}")
    assert s3_store.read_bytes(SCOPE, pointer_key("c"), 10) == b"{}"


def test_listing_newest_first_with_completeness(any_store: CheckpointStore, tmp_path: Path) -> None:
    a = build_checkpoint(any_store, SCOPE, tmp_path / "a", kind="claude", checkpoint_id="ckpt-1", sequence=1)
    b = build_checkpoint(
        any_store, SCOPE, tmp_path / "b", kind="context", checkpoint_id="ckpt-2", sequence=2,
        execution_id=a.execution_id,
    )  # fmt: skip
    c = build_checkpoint(
        any_store, SCOPE, tmp_path / "c", kind="codex", checkpoint_id="ckpt-3", sequence=3,
        execution_id="exe-" + "c" * 32, execution_generation=2, compatibility_key="worker:2.0.0",
    )  # fmt: skip
    rows = any_store.list_checkpoints(SCOPE)
    assert [r.checkpoint_id for r in rows] == ["ckpt-3", "ckpt-2", "ckpt-1"]
    assert all(r.complete for r in rows)
    assert [(r.native, r.harness) for r in rows] == [(True, "codex"), (False, "claude"), (True, "claude")]
    assert rows[2].native_session_id == a.session_id and rows[2].watermark == a.watermark
    assert [r.checkpoint_id for r in any_store.list_checkpoints(SCOPE, execution_id=a.execution_id)] == [
        "ckpt-2",
        "ckpt-1",
    ]
    picked = newest_compatible(rows, "worker:1.0.0")
    assert picked is not None and picked.checkpoint_id == "ckpt-2"
    # A missing object makes the row incomplete (no hashing needed to see it).
    key = object_key(b.record.artifact_hashes["transcript"])
    if isinstance(any_store, S3Store):
        s3_delete(any_store, key)
    else:
        (any_store.root / SCOPE.prefix / key).unlink()  # type: ignore[attr-defined]
    rows = any_store.list_checkpoints(SCOPE)
    assert [r.complete for r in rows] == [True, False, True]
    picked = newest_compatible(rows, "worker:1.0.0")
    assert picked is not None and picked.checkpoint_id == "ckpt-1"
    assert c.execution_generation == rows[0].execution_generation == 2
    assert any_store.list_checkpoints(StoreScope(swarm="swarm-a", task_id="task-1", task_generation=2)) == []


def test_listing_marks_inconsistent_or_wrong_size_records_incomplete(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    build_checkpoint(store, SCOPE, tmp_path / "a", checkpoint_id="ckpt-1")
    edit_record(
        store, SCOPE, "ckpt-1", lambda r: r["artifacts"][0].update(size=r["artifacts"][0]["size"] + 1)
    )
    [row] = store.list_checkpoints(SCOPE)
    assert not row.complete
    edit_record(store, SCOPE, "ckpt-1", lambda r: r.update(status="uploading"))
    [row] = store.list_checkpoints(SCOPE)
    assert not row.complete
    store.write_bytes(SCOPE, store.read_pointer(SCOPE, "ckpt-1")[0], b"not json")
    assert store.list_checkpoints(SCOPE) == []


def test_no_store_means_an_empty_listing() -> None:
    from agentihooks_checkpoint.catalog import EmptyCatalog

    assert store_from_env({}) is None
    assert EmptyCatalog().list_checkpoints(SCOPE) == []


def test_unreachable_s3_is_a_refusal_not_a_traceback(tmp_path: Path) -> None:
    from botocore.config import Config

    with socket_port() as port:
        client = boto3.client(
            "s3",
            endpoint_url=f"http://127.0.0.1:{port}",
            region_name="us-east-1",
            config=Config(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=2),
        )
        store = S3Store("nowhere", client)
        v = Validator().verify(store, SCOPE, "ckpt-1", execution_id="exe-1", execution_generation=1)
    assert str(v) == "store_unreachable"  # no answer says nothing about the checkpoint


def socket_port() -> Any:
    """A port nothing listens on (bound, never listening, while the test runs)."""
    import contextlib
    import socket

    @contextlib.contextmanager
    def cm() -> Iterator[int]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            yield s.getsockname()[1]

    return cm()


@pytest.fixture(scope="module")
def s3_flip(s3_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[S3Store, Any, list[str]]:
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    client.create_bucket(Bucket="flip-module")
    store = S3Store("flip-module", client)
    b = build_checkpoint(store, SCOPE, tmp_path_factory.mktemp("s3flip"), kind="codex")
    keys = [store.read_pointer(SCOPE, b.checkpoint_id)[0]]
    keys += [object_key(d) for d in sorted(set(b.record.artifact_hashes.values()))]
    return store, b, keys


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_s3_any_flipped_byte_is_detected(
    s3_flip: tuple[S3Store, Any, list[str]], data: st.DataObject
) -> None:
    store, b, keys = s3_flip
    index = data.draw(st.integers(0, len(keys) - 1))
    original = store.read_bytes(SCOPE, keys[index], 1 << 24)
    offset = data.draw(st.integers(0, len(original) - 1))
    flipped = bytearray(original)
    flipped[offset] ^= data.draw(st.integers(1, 255))
    s3_put(store, keys[index], bytes(flipped))
    try:
        v = Validator().verify(
            store, SCOPE, b.checkpoint_id, execution_id=b.execution_id, execution_generation=1
        )
        assert str(v) == ("corrupt_manifest" if index == 0 else "corrupt_object")
    finally:
        s3_put(store, keys[index], original)
