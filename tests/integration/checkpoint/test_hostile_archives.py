"""Hostile checkpoint archives are refused from their headers, before anything is written.

Every archive here is built by the test itself: a 2.5 KB GNU sparse member
claiming 2 GiB, links, devices, FIFOs, too many members, and members that claim
more bytes than the archive declares. Each is refused by the archive checks,
by the Validator (``corrupt_object``, with the member named in the verdict's
detail) and by a real ``agentihooks-worker boot`` process, which may not write
more than 64 MiB to any file (``RLIMIT_FSIZE``): the 2 GiB expansion would
kill it. The launch record's size cap applies while it is read, so a 200 MB
launch record never lands in the worker's memory.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
from agentihooks_checkpoint.archive import (
    ArchiveLimits,
    ArchiveRefused,
    check_stream,
    extract_archive,
    unpack_stream,
)
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores import LocalStore
from agentihooks_checkpoint.validator import Validator
from agentihooks_worker.attempt import AttemptLayout
from testsupport.checkpoints import build_checkpoint, edit_record
from testsupport.fake_harness import BIN, CLAUDE

SCOPE = StoreScope(swarm="swarm-a", task_id="task-1", task_generation=1)
GIB = 1024**3
SPARSE_NAME = ".claude/projects/p/session.jsonl"


def _octal(n: int, width: int) -> bytes:
    return (format(n, "o").rjust(width - 1, "0") + "\0").encode()


def gnu_sparse_tar(name: str, realsize: int, data: bytes = b"x" * 1024) -> bytes:
    """One GNU sparse member (type ``S``): ``data`` stored at the end of a ``realsize`` file of holes."""
    hdr = bytearray(512)
    hdr[0 : len(name)] = name.encode()
    hdr[100:108] = _octal(0o600, 8)
    hdr[108:116] = _octal(0, 8)
    hdr[116:124] = _octal(0, 8)
    hdr[124:136] = _octal(len(data), 12)
    hdr[136:148] = _octal(0, 12)
    hdr[156:157] = b"S"
    hdr[257:265] = b"ustar  \0"
    hdr[386:398] = _octal(realsize - len(data), 12)  # the one data run: offset, length
    hdr[398:410] = _octal(len(data), 12)
    hdr[483:495] = _octal(realsize, 12)
    hdr[148:156] = b" " * 8
    hdr[148:156] = format(sum(hdr), "o").rjust(6, "0").encode() + b"\0 "
    return bytes(hdr) + data + b"\0" * (-len(data) % 512) + b"\0" * 1024


def test_the_sparse_fixture_is_what_it_claims() -> None:
    raw = gnu_sparse_tar(SPARSE_NAME, 2 * GIB)
    assert len(raw) == 2560
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r|") as tar:
        [m] = list(tar)
    assert m.issparse() and m.isreg() and m.size == 2 * GIB


def special_tar(kind: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        ok = tarfile.TarInfo("ok.txt")
        ok.size = 2
        tar.addfile(ok, io.BytesIO(b"ok"))
        info = tarfile.TarInfo(f"bad-{kind}")
        if kind == "symlink":
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        elif kind == "hardlink":
            info.type, info.linkname = tarfile.LNKTYPE, "ok.txt"
        elif kind == "chardev":
            info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
        elif kind == "blockdev":
            info.type, info.devmajor, info.devminor = tarfile.BLKTYPE, 8, 0
        elif kind == "fifo":
            info.type = tarfile.FIFOTYPE
        elif kind == "contiguous":
            info.type, info.size = tarfile.CONTTYPE, 2
            tar.addfile(info, io.BytesIO(b"no"))
            return buf.getvalue()
        tar.addfile(info)
    return buf.getvalue()


def many_files(n: int, size: int = 10) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for i in range(n):
            info = tarfile.TarInfo(f"f{i:03d}.txt")
            info.size = size
            tar.addfile(info, io.BytesIO(b"y" * size))
    return buf.getvalue()


def claims_more(name: str = "big.bin", claimed: int = 10 * 1024**2) -> bytes:
    """A regular member whose header claims ``claimed`` bytes; only 1 KiB of data follows."""
    info = tarfile.TarInfo(name)
    info.size = claimed
    return info.tobuf(format=tarfile.USTAR_FORMAT) + b"z" * 1024 + b"\0" * 1024


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() or p.is_symlink()]


def test_a_sparse_member_is_refused_before_a_byte_is_written(tmp_path: Path) -> None:
    raw = gnu_sparse_tar(SPARSE_NAME, 2 * GIB)
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(ArchiveRefused, match="sparse") as e:
        unpack_stream(io.BytesIO(raw), dest, declared=len(raw))
    assert e.value.member == SPARSE_NAME and repr(SPARSE_NAME) in str(e.value)
    assert files_under(dest) == []
    with pytest.raises(ArchiveRefused, match="sparse"):
        check_stream(io.BytesIO(raw))
    path = tmp_path / "s.tar"
    path.write_bytes(raw)
    with pytest.raises(ArchiveRefused, match="sparse"):
        extract_archive(path, tmp_path / "x")
    assert not (tmp_path / "x").exists() or files_under(tmp_path / "x") == []


@pytest.mark.parametrize(
    ("kind", "words"),
    [
        ("symlink", "symbolic link"),
        ("hardlink", "hard link"),
        ("chardev", "character device"),
        ("blockdev", "block device"),
        ("fifo", "FIFO"),
        ("contiguous", "unsupported type"),
    ],
)
def test_every_member_type_but_files_and_folders_is_refused_by_name(
    tmp_path: Path, kind: str, words: str
) -> None:
    raw = special_tar(kind)
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(ArchiveRefused, match=words) as e:
        unpack_stream(io.BytesIO(raw), dest, declared=len(raw))
    assert e.value.member == f"bad-{kind}" and f"'bad-{kind}'" in str(e.value)
    assert not any(p.is_symlink() for p in dest.rglob("*"))
    assert not (dest / f"bad-{kind}").exists()
    with pytest.raises(ArchiveRefused, match=words):
        check_stream(io.BytesIO(raw))


def test_too_many_members_are_refused_naming_the_first_one_past_the_cap(tmp_path: Path) -> None:
    raw = many_files(11)
    limits = ArchiveLimits(max_members=10)
    with pytest.raises(ArchiveRefused, match="more than 10 members") as e:
        check_stream(io.BytesIO(raw), limits)
    assert e.value.member == "f010.txt"
    check_stream(io.BytesIO(many_files(10)), limits)  # at the cap is fine


def test_members_claiming_more_than_the_archive_declares_are_refused_before_writing(tmp_path: Path) -> None:
    raw = claims_more()
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(ArchiveRefused, match="declared size") as e:
        unpack_stream(io.BytesIO(raw), dest, declared=len(raw))
    assert e.value.member == "big.bin" and files_under(dest) == []
    # Honest members always fit in the archive's own size.
    honest = many_files(5, size=1000)
    assert check_stream(io.BytesIO(honest), declared=len(honest)) == 5


def test_the_absolute_cap_applies_whatever_the_archive_declares(tmp_path: Path) -> None:
    raw = many_files(5, size=1000)
    with pytest.raises(ArchiveRefused, match="cap of 3000 bytes") as e:
        check_stream(io.BytesIO(raw), ArchiveLimits(max_expanded=3000), declared=len(raw))
    assert e.value.member == "f003.txt"


def test_limits_from_the_environment() -> None:
    limits = ArchiveLimits.from_env(
        {"AGENTIHOOKS_ARCHIVE_MAX_MEMBERS": "7", "AGENTIHOOKS_ARCHIVE_MAX_EXPANDED_BYTES": "4096"}
    )
    assert (limits.max_members, limits.max_expanded) == (7, 4096)
    with pytest.raises(ValueError, match="AGENTIHOOKS_ARCHIVE_MAX_MEMBERS"):
        ArchiveLimits.from_env({"AGENTIHOOKS_ARCHIVE_MAX_MEMBERS": "0"})


def hostile_checkpoint(tmp_path: Path, raw: bytes, role: str = "native_session") -> tuple[LocalStore, Any]:
    """A real claude checkpoint whose ``role`` archive is replaced by ``raw`` (record recommitted)."""
    store = LocalStore(tmp_path / "store")
    built = build_checkpoint(store, SCOPE, tmp_path / "w", kind="claude", harness_version="2.1.332")
    src = tmp_path / "hostile.tar"
    src.write_bytes(raw)
    obj = store.put_object(SCOPE, src)

    def swap(rec: dict[str, Any]) -> None:
        rec["artifact_hashes"][role] = obj.digest
        for entry in rec["artifacts"]:
            if entry["role"] == role:
                entry["digest"], entry["size"] = obj.digest, obj.size

    edit_record(store, SCOPE, built.checkpoint_id, swap)
    return store, built


@pytest.mark.parametrize("role", ["native_session", "untracked"])
def test_the_validator_refuses_a_sparse_archive_as_corrupt_naming_no_member(
    tmp_path: Path, role: str
) -> None:
    store, built = hostile_checkpoint(tmp_path, gnu_sparse_tar(SPARSE_NAME, 2 * GIB), role)
    stage = tmp_path / "stage"
    verdict = Validator().verify(
        store,
        SCOPE,
        built.checkpoint_id,
        execution_id=built.execution_id,
        execution_generation=1,
        stage_dir=stage,
        unpack_archives=True,
    )
    assert str(verdict) == "corrupt_object"
    # the role and what is wrong, never the member's name (a verdict names no record values or paths)
    assert verdict.detail == f"{role}: archive member is a sparse file"
    assert SPARSE_NAME not in verdict.detail
    assert list(stage.iterdir()) == []


#: Runs the worker's CLI with no file larger than 64 MiB allowed (a 2 GiB expansion would stop it).
WORKER = (
    "import resource; resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 20, 64 << 20)); "
    "from agentihooks_worker.cli import main; main()"
)


#: Starts the worker from a small process of its own and prints its peak RSS (KiB): a child started
#: straight from the test would inherit the test process's peak in ``ru_maxrss``.
MEASURE = (
    "import os, subprocess, sys; "
    "p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL); "
    "_, status, usage = os.wait4(p.pid, 0); "
    "print(usage.ru_maxrss); "
    "sys.exit(os.waitstatus_to_exitcode(status) & 0xFF)"
)


def run_worker(env: dict[str, str]) -> tuple[int, str, int]:
    """``agentihooks-worker boot`` as a process; (exit code, stderr, peak RSS in KiB)."""
    cmd = [sys.executable, "-c", MEASURE, sys.executable, "-c", WORKER, "boot"]
    done = subprocess.run(cmd, env=env, capture_output=True, check=False)
    return done.returncode, done.stderr.decode(), int(done.stdout.decode().strip() or 0)


def worker_env(tmp_path: Path, launch: dict[str, Any], remotes: dict[str, str]) -> dict[str, str]:
    (tmp_path / "launch.json").write_text(json.dumps(launch))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAKE_", "AGENTIHOOKS_"))}
    env.update(
        {
            "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
            "FAKE_HARNESS_LOG": str(tmp_path / "harness.log"),
            "AGENTIHOOKS_CHECKPOINT_ROOT": str(tmp_path / "store"),
            "AGENTIHOOKS_ATTEMPTS_DIR": str(tmp_path / "attempts"),
            "AGENTIHOOKS_LAUNCH_RECORD": str(tmp_path / "launch.json"),
            "AGENTIHOOKS_PROJECT_REMOTES": json.dumps(remotes),
            "AGENTIHOOKS_CAPTURE_INTERVAL_SECONDS": "0",
            "AGENTIHOOKS_CAPTURE_MODE": "periodic",
        }
    )
    return env


def refusals(err: str) -> list[dict[str, Any]]:
    out = []
    for line in err.splitlines():
        if line.startswith("{"):
            obj = json.loads(line)
            if obj.get("event") == "restore_refused":
                out.append(obj)
    return out


def test_a_worker_refuses_a_sparse_native_archive_without_writing_it(tmp_path: Path) -> None:
    _, built = hostile_checkpoint(tmp_path, gnu_sparse_tar(SPARSE_NAME, 2 * GIB))
    launch = {
        "schema_version": 1,
        "authority": {
            "execution_id": "exe-new",
            "generation": 2,
            "task_id": SCOPE.task_id,
            "seat_id": "eng-1",
            "swarm_id": SCOPE.swarm,
            "grant_id": "grant-2",
        },
        "harness": "claude",
        "agent": [str(CLAUDE), "-p", "carry on"],
        "registration": {
            "projects": ["local:fixture"],
            "task_generation": 1,
            "compatibility_key": built.compatibility_key,
        },
        "restore_from": {"execution_id": built.execution_id, "execution_generation": 1},
        "restore": {
            "checkpoint_id": built.checkpoint_id,
            "recovery": "native",
            "session_id": built.session_id,
            "watermark": built.watermark,
        },
    }
    code, err, _ = run_worker(worker_env(tmp_path, launch, {"local:fixture": str(built.worktree)}))
    assert code == 64, err
    [refused] = refusals(err)
    assert refused["reason"] == "corrupt_object"
    assert refused["detail"].endswith("archive member is a sparse file") and SPARSE_NAME not in err
    layout = AttemptLayout(tmp_path / "attempts", "exe-new", "claude", SCOPE.task_id)
    biggest = max((p.stat().st_size for p in files_under(layout.root) if p.is_file()), default=0)
    assert biggest < 1024**2
    assert not (tmp_path / "harness.log").exists()  # the harness never started


def test_a_200_mb_launch_record_is_refused_without_reading_it_into_memory(tmp_path: Path) -> None:
    env = worker_env(tmp_path, {}, {})
    with (tmp_path / "launch.json").open("wb") as f:  # replaces the one worker_env wrote
        f.write(b'{"schema_version": 1, "pad": "')
        for _ in range(200):  # 1 MiB at a time: the test itself never holds the record
            f.write(b"x" * 1024**2)
        f.write(b'"}')
    code, err, peak_kib = run_worker(env)
    assert code == 64, err
    [refused] = refusals(err)
    assert refused["reason"] == "invalid_launch_record" and "1 MiB" in refused["message"]
    # The interpreter and its imports take some tens of MiB; reading the record whole took 250 MiB more.
    assert peak_kib < 150 * 1024, f"peak RSS {peak_kib} KiB"
