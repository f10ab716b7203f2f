"""Archives staged unpacked: the member files kept are the verified bytes, hostile archives leave nothing.

``Validator.verify(unpack_archives=True)`` writes each archive's regular
members into the stage as it hashes the stream, so a restore can rename them
into place. The same checks as for a staged tar apply; a refused archive
leaves the stage empty, and moving files into place never follows a symlink.
"""

from __future__ import annotations

import io
import stat
import tarfile
from pathlib import Path

import pytest
from agentihooks_checkpoint.archive import ArchiveRefused, build_archive, unpack_stream
from agentihooks_checkpoint.layout import object_key
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores import LocalStore
from agentihooks_checkpoint.validator import Validator
from agentihooks_worker.native import place_files
from testsupport.checkpoints import build_checkpoint, store_path

SCOPE = StoreScope(swarm="swarm-a", task_id="task-1", task_generation=1)


def verify(store: LocalStore, b, stage: Path):  # type: ignore[no-untyped-def]
    return Validator().verify(
        store,
        SCOPE,
        b.checkpoint_id,
        execution_id=b.execution_id,
        execution_generation=1,
        stage_dir=stage,
        unpack_archives=True,
    )


def test_archive_members_are_staged_as_private_files_with_the_stored_bytes(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    b = build_checkpoint(store, SCOPE, tmp_path / "w", kind="claude")
    v = verify(store, b, tmp_path / "stage")
    assert v.ok and v.staged is not None
    for role in ("native_session", "untracked"):
        art = v.staged.artifacts[role]
        assert art.members and art.path.is_dir()
        stored = store_path(store, SCOPE, object_key(art.digest))
        with tarfile.open(stored) as tar:
            expected = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isreg()}  # type: ignore[union-attr]
        assert {name: path.read_bytes() for name, path in art.members.items()} == expected
        for path in art.members.values():
            assert path.is_relative_to(art.path) and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert v.staged.artifacts["transcript"].members is None  # not an archive: staged as it is
    with pytest.raises(ValueError, match="tar"):
        v.staged.artifacts["untracked"].extract_to(tmp_path / "x")


def test_a_corrupt_archive_leaves_the_stage_empty(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    b = build_checkpoint(store, SCOPE, tmp_path / "w", kind="codex")
    path = store_path(store, SCOPE, object_key(b.record.artifact_hashes["untracked"]))
    path.write_bytes(path.read_bytes()[:-3])
    stage = tmp_path / "stage"
    assert str(verify(store, b, stage)) == "corrupt_object"
    assert list(stage.iterdir()) == []


def tar_bytes(kind: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:

        def add(name: str, data: bytes = b"x") -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

        if kind == "symlink":
            info = tarfile.TarInfo("notes.md")
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(info)
        elif kind == "dotdot":
            add("../escape.md")
        elif kind == "absolute":
            add("/abs/escape.md")
        elif kind == "repeat":
            add("a.md")
            add("a.md")
        elif kind == "collide":
            add("a")
            add("a/b")
        elif kind == "garbage":
            return b"not a tar" * 100
    return buf.getvalue()


@pytest.mark.parametrize("kind", ["symlink", "dotdot", "absolute", "repeat", "collide", "garbage"])
def test_hostile_archives_are_refused_while_unpacking(tmp_path: Path, kind: str) -> None:
    dest = tmp_path / "stage" / "obj"
    dest.mkdir(parents=True)
    with pytest.raises(ArchiveRefused):
        unpack_stream(io.BytesIO(tar_bytes(kind)), dest)
    assert not (tmp_path / "escape.md").exists() and not (tmp_path / "stage" / "escape.md").exists()
    assert not any(p.is_symlink() for p in dest.rglob("*"))


def test_placing_files_moves_them_and_never_writes_through_a_symlink(tmp_path: Path) -> None:
    src = tmp_path / "src.md"
    src.write_bytes(b"secret\n")
    tar = tmp_path / "u.tar"
    build_archive(tar, [(src, "notes/a.md"), (src, "top.md")])
    stage = tmp_path / "stage"
    stage.mkdir()
    with tar.open("rb") as f:
        members = unpack_stream(f, stage)
    wt = tmp_path / "wt"
    wt.mkdir()
    written = place_files(members, wt)
    assert sorted(written) == [wt / "notes" / "a.md", wt / "top.md"]
    assert all(p.read_bytes() == b"secret\n" and stat.S_IMODE(p.stat().st_mode) == 0o600 for p in written)
    assert not any(p.exists() for p in members.values())  # moved, not copied
    # A symlink planted where a file or a folder goes is refused, and nothing lands outside.
    outside = tmp_path / "outside"
    outside.mkdir()
    for planted in ("notes", "top.md"):
        wt2 = tmp_path / f"wt-{planted}"
        wt2.mkdir()
        (wt2 / planted).symlink_to(outside / planted if planted == "top.md" else outside)
        stage2 = tmp_path / f"stage-{planted}"
        stage2.mkdir()
        with tar.open("rb") as f:
            again = unpack_stream(f, stage2)
        with pytest.raises(ArchiveRefused, match="symlink"):
            place_files(again, wt2)
        assert list(outside.iterdir()) == []
