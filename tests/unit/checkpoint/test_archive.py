"""Archives of native and untracked files: built safe, hostile ones refused before anything is written."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
from agentihooks_checkpoint.archive import ArchiveRefused, build_archive, check_stream, extract_archive


def hostile_tar(path: Path, kind: str) -> Path:
    with tarfile.open(path, "w") as tar:
        good = tarfile.TarInfo("ok.txt")
        good.size = 2
        tar.addfile(good, io.BytesIO(b"ok"))
        if kind == "symlink":
            m = tarfile.TarInfo("link")
            m.type = tarfile.SYMTYPE
            m.linkname = "/etc/passwd"
            tar.addfile(m)
        elif kind == "hardlink":
            m = tarfile.TarInfo("hard")
            m.type = tarfile.LNKTYPE
            m.linkname = "ok.txt"
            tar.addfile(m)
        elif kind == "fifo":
            m = tarfile.TarInfo("pipe")
            m.type = tarfile.FIFOTYPE
            tar.addfile(m)
        else:
            m = tarfile.TarInfo(kind)
            m.size = 4
            tar.addfile(m, io.BytesIO(b"evil"))
    return path


def test_build_then_extract_round_trips_with_private_modes(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "a" / "b").mkdir(parents=True)
    (src / "a" / "b" / "f.jsonl").write_bytes(b"x\xe2\x80\xa8y\n")
    build_archive(tmp_path / "t.tar", [(src / "a" / "b" / "f.jsonl", ".claude/projects/p/f.jsonl")])
    with (tmp_path / "t.tar").open("rb") as f:
        assert check_stream(f) == 1
    dest = tmp_path / "dest"
    dest.mkdir()
    [written] = extract_archive(tmp_path / "t.tar", dest)
    assert written == dest / ".claude/projects/p/f.jsonl"
    assert written.read_bytes() == b"x\xe2\x80\xa8y\n"
    assert written.stat().st_mode & 0o777 == 0o600
    assert (dest / ".claude").stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize(
    "kind", ["symlink", "hardlink", "fifo", "../escape.txt", "/abs/escape.txt", "a/../../x"]
)
def test_hostile_archives_are_refused_and_write_nothing(tmp_path: Path, kind: str) -> None:
    tar = hostile_tar(tmp_path / "h.tar", kind)
    with tar.open("rb") as f, pytest.raises(ArchiveRefused):
        check_stream(f)
    dest = tmp_path / "dest" / "inner"
    dest.mkdir(parents=True)
    with pytest.raises(ArchiveRefused):
        extract_archive(tar, dest)
    assert list(dest.iterdir()) == []
    assert sorted(p.name for p in (tmp_path / "dest").iterdir()) == ["inner"]


def test_extract_never_follows_a_symlink_planted_in_the_target(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    src = tmp_path / "f"
    src.write_text("data")
    build_archive(tmp_path / "t.tar", [(src, "sub/f")])
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "sub").symlink_to(outside)
    with pytest.raises(ArchiveRefused):
        extract_archive(tmp_path / "t.tar", dest)
    assert list(outside.iterdir()) == []


def test_garbage_is_not_an_archive(tmp_path: Path) -> None:
    with pytest.raises(ArchiveRefused):
        check_stream(io.BytesIO(b"\x01" * 1024))
    (tmp_path / "g.tar").write_bytes(b"\x01" * 1024)
    with pytest.raises(ArchiveRefused):
        extract_archive(tmp_path / "g.tar", tmp_path)


def test_build_refuses_symlinks_and_escaping_names(tmp_path: Path) -> None:
    (tmp_path / "real").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(ArchiveRefused):
        build_archive(tmp_path / "a.tar", [(tmp_path / "link", "link")])
    with pytest.raises(ArchiveRefused):
        build_archive(tmp_path / "b.tar", [(tmp_path / "real", "../real")])
