"""Verified bytes are staged privately; any flipped byte is caught with the right reason."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import BinaryIO

import pytest
from agentihooks_checkpoint.layout import object_key
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores import LocalStore
from agentihooks_checkpoint.validator import Validator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from testsupport.checkpoints import BuiltCheckpoint, build_checkpoint, store_path

SCOPE = StoreScope(swarm="swarm-a", task_id="task-1", task_generation=1)


def verify(store: LocalStore, b: BuiltCheckpoint, stage: Path | None = None) -> object:
    return Validator().verify(
        store, SCOPE, b.checkpoint_id, execution_id=b.execution_id, execution_generation=1, stage_dir=stage
    )


def test_staged_files_are_private_and_are_what_was_hashed(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    b = build_checkpoint(store, SCOPE, tmp_path / "w", kind="claude")
    stage = tmp_path / "stage" / "ckpt"
    v = verify(store, b, stage)
    assert v.ok and v.staged is not None  # type: ignore[attr-defined]
    assert stage.stat().st_mode & 0o777 == 0o700
    for art in v.staged.artifacts.values():  # type: ignore[attr-defined]
        assert art.path.parent == stage
        assert art.path.stat().st_mode & 0o777 == 0o600
        assert "sha256:" + hashlib.sha256(art.path.read_bytes()).hexdigest() == art.digest
    # Swapping an object in the store afterwards changes nothing that will be applied.
    staged_transcript = v.staged.artifacts["transcript"]  # type: ignore[attr-defined]
    before = staged_transcript.path.read_bytes()
    store_path(store, SCOPE, object_key(staged_transcript.digest)).write_bytes(b"swapped")
    assert staged_transcript.path.read_bytes() == before


def test_refusal_leaves_the_stage_empty_and_verdicts_name_nothing(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    b = build_checkpoint(store, SCOPE, tmp_path / "w", kind="codex", checkpoint_id="ckpt-secret-id")
    ok = verify(store, b)
    path = store_path(store, SCOPE, object_key(b.record.artifact_hashes["untracked"]))
    path.write_bytes(path.read_bytes()[:-3])
    stage = tmp_path / "stage"
    bad = verify(store, b, stage)
    assert str(bad) == "corrupt_object"
    assert list(stage.iterdir()) == []
    for verdict in (ok, bad):
        text = str(verdict) + repr(verdict)
        for value in (b.checkpoint_id, b.execution_id, str(tmp_path), b.session_id or "-", "sha256"):
            assert value not in text


def test_stage_folder_must_be_empty(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    b = build_checkpoint(store, SCOPE, tmp_path / "w", kind="context")
    (tmp_path / "stage").mkdir()
    (tmp_path / "stage" / "leftover").write_text("x")
    with pytest.raises(ValueError, match="empty"):
        verify(store, b, tmp_path / "stage")


class RendezvousStore(LocalStore):
    """Every read waits until two reads are open at once: serial fetching would fail."""

    max_concurrency = 4

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.barrier = threading.Barrier(2, timeout=20)
        self.gate = False

    def open_read(self, scope: StoreScope, key: str) -> AbstractContextManager[BinaryIO]:
        if self.gate and key.startswith("objects/"):
            self.barrier.wait()
        return super().open_read(scope, key)


def test_objects_are_fetched_concurrently(tmp_path: Path) -> None:
    store = RendezvousStore(tmp_path / "store")
    b = build_checkpoint(store, SCOPE, tmp_path / "w", kind="context", dirty=False)
    assert len(b.record.artifact_hashes) == 2
    store.gate = True
    assert verify(store, b).ok  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def flip_target(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[LocalStore, BuiltCheckpoint, list[Path]]]:
    tmp = tmp_path_factory.mktemp("flip")
    store = LocalStore(tmp / "store")
    b = build_checkpoint(store, SCOPE, tmp / "w", kind="claude")
    files = [store_path(store, SCOPE, store.read_pointer(SCOPE, b.checkpoint_id)[0])]
    files += [store_path(store, SCOPE, object_key(d)) for d in sorted(set(b.record.artifact_hashes.values()))]
    yield store, b, files


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_flipped_byte_is_detected_with_the_right_reason(
    flip_target: tuple[LocalStore, BuiltCheckpoint, list[Path]], data: st.DataObject
) -> None:
    store, b, files = flip_target
    index = data.draw(st.integers(0, len(files) - 1), label="file")
    path = files[index]
    original = path.read_bytes()
    offset = data.draw(st.integers(0, len(original) - 1), label="offset")
    mask = data.draw(st.integers(1, 255), label="mask")
    flipped = bytearray(original)
    flipped[offset] ^= mask
    path.write_bytes(bytes(flipped))
    try:
        assert str(verify(store, b)) == ("corrupt_manifest" if index == 0 else "corrupt_object")
    finally:
        path.write_bytes(original)
    assert verify(store, b).ok  # type: ignore[attr-defined]
