"""Benchmark: restore a ~512 MiB checkpoint (native session files plus source) from a local store.

The restore is what a replacement worker does before its harness starts:
``Validator.verify`` (hash every object, staging the verified bytes), the
native files into a fresh harness home, the version check, then the git
bundle, patch and untracked files into a fresh clone. The baseline, measured
in the same run over the same stored bytes, is reading each object, hashing
it with sha256 and copying it to another file. Target: ratio at most 1.5.

    python bench/restore.py [--size-mib 512] [--repeat 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "worker")]

from agentihooks_checkpoint.launch import LaunchRecord  # noqa: E402
from agentihooks_checkpoint.layout import object_key  # noqa: E402
from agentihooks_checkpoint.scope import StoreScope  # noqa: E402
from agentihooks_checkpoint.stores import LocalStore  # noqa: E402
from agentihooks_worker.attempt import AttemptLayout  # noqa: E402
from agentihooks_worker.capture import CaptureRequest, capture  # noqa: E402
from agentihooks_worker.harness import ClaudeCode  # noqa: E402
from agentihooks_worker.harness.claude import encode_cwd  # noqa: E402
from agentihooks_worker.restorer import Restorer, RestoreRequest  # noqa: E402

PHASES: dict[str, list[float]] = {}
SCOPE = StoreScope(swarm="bench", task_id="task-1", task_generation=1)
MIB = 1 << 20
GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], env=GIT_ENV, capture_output=True, check=True)
    return done.stdout.decode().strip()


def write_random(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        left = size
        while left:
            n = min(left, 8 * MIB)
            f.write(os.urandom(n))
            left -= n


def write_transcript(path: Path, size: int) -> int:
    """JSONL records (with raw U+2028) up to ``size`` bytes; returns the record count."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line_body = os.urandom(3000).hex()
    count = 0
    with path.open("wb") as f:
        written = 0
        while written < size:
            rec = (
                json.dumps({"seq": count, "text": "a\u2028b " + line_body}, ensure_ascii=False).encode()
                + b"\n"
            )
            f.write(rec)
            written += len(rec)
            count += 1
    return count


def build(work: Path, total: int) -> tuple[LocalStore, str, str, Path]:
    """Capture one native Claude checkpoint of about ``total`` bytes; return store, session, base, origin."""
    store = LocalStore(work / "store")
    origin = work / "fenced" / "worktree"
    origin.mkdir(parents=True)
    git(origin, "init", "-q", "-b", "main")
    (origin / "README.md").write_text("bench project\n")
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "base")
    base = git(origin, "rev-parse", "HEAD")
    git(origin, "checkout", "-q", "-b", "task")
    # stored bytes: the transcript twice (its own role and inside the native archive), the rest once
    transcript, subagent = total * 30 // 100, total * 4 // 100
    committed, untracked = total * 8 // 100, total * 28 // 100
    write_random(origin / "assets" / "model.bin", committed)
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "work")
    (origin / "README.md").write_text("bench project\nedited\n")
    for i in range(8):
        write_random(origin / "out" / f"part-{i}.bin", untracked // 8)
    home = work / "fenced" / "home"
    session = "0f9e3a52-7c1d-4a8e-9b61-2d5c8e4f7a10"
    rel = f".claude/projects/{encode_cwd(origin)}/{session}.jsonl"
    records = write_transcript(home / rel, transcript)
    sub = f".claude/projects/{encode_cwd(origin)}/{session}/subagents/agent-1.jsonl"
    write_transcript(home / sub, subagent)
    req = CaptureRequest(
        scope=SCOPE,
        checkpoint_id="ckpt-bench",
        checkpoint_sequence=1,
        execution_id="exe-old",
        execution_generation=1,
        project_id="local:bench",
        harness="claude",
        compatibility_key="worker:bench",
        transcript=home / rel,
        watermark=records - 1,
        worktree=origin,
        base_commit=base,
        harness_home=home,
        native_files=[rel, sub],
        native_session_id=session,
        native_harness_version="2.1.332",
    )
    capture(store, req, work_dir=work)
    return store, session, base, origin


def baseline(store: LocalStore, digests: list[str], dest: Path) -> float:
    """Read every stored object, sha256 it and copy it: the same bytes the restore reads."""
    dest.mkdir()
    start = time.perf_counter()
    for i, digest in enumerate(digests):
        src = store.root / SCOPE.prefix / object_key(digest)
        h = hashlib.sha256()
        with src.open("rb") as f, (dest / str(i)).open("wb") as out:
            while chunk := f.read(MIB):
                h.update(chunk)
                out.write(chunk)
        assert "sha256:" + h.hexdigest() == digest
    return time.perf_counter() - start


def restore_once(store: LocalStore, session: str, origin: Path, work: Path, claude: Path) -> float:
    launch = LaunchRecord.model_validate(
        {
            "schema_version": 1,
            "authority": {
                "execution_id": "exe-new",
                "generation": 2,
                "task_id": SCOPE.task_id,
                "seat_id": "s-1",
                "swarm_id": SCOPE.swarm,
                "grant_id": "g-1",
            },
            "harness": "claude",
            "agent": [str(claude)],
            "registration": {
                "projects": ["local:bench"],
                "task_generation": 1,
                "compatibility_key": "worker:bench",
            },
            "restore_from": {"execution_id": "exe-old", "execution_generation": 1},
            "restore": {
                "checkpoint_id": "ckpt-bench",
                "recovery": "native",
                "session_id": session,
                "watermark": 1,
            },
        }
    )
    layout = AttemptLayout(work, "exe-new", "claude", SCOPE.task_id)
    layout.create()
    req = RestoreRequest(
        launch, layout, ClaudeCode(), store, layout.environment(), {"local:bench": str(origin)}
    )
    marks: list[tuple[str, float]] = []
    start = time.perf_counter()
    restorer = Restorer(on_step=lambda step: marks.append((step, time.perf_counter())))
    restored = restorer.restore(req)
    elapsed = time.perf_counter() - start
    restorer.wait_cleanup()  # the stage folder is freed in the background, after the harness could start
    assert restored.outcome.recovery.value == "native"
    prev = start
    for step, at in marks:
        PHASES.setdefault(step, []).append(at - prev)
        prev = at
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-mib", type=int, default=512, help="approximate checkpoint size (default 512)")
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of each side; the best is kept (default 3)"
    )
    parser.add_argument("--dir", type=Path, default=None, help="work folder (default: /dev/shm when roomy)")
    args = parser.parse_args()
    parent = args.dir
    shm = Path("/dev/shm")
    if parent is None and shm.is_dir() and shutil.disk_usage(shm).free > 8 * args.size_mib * MIB:
        parent = shm  # both sides write to memory: disk write-back of other work does not skew the ratio
    work = Path(tempfile.mkdtemp(prefix="bench-restore-", dir=parent))
    try:
        claude = work / "claude"
        claude.write_text('#!/bin/sh\necho "2.1.332 (Claude Code)"\n')
        claude.chmod(0o755)
        store, session, _, origin = build(work, args.size_mib * MIB)
        record = store.read_bytes(SCOPE, store.read_pointer(SCOPE, "ckpt-bench")[0], MIB)
        digests = [a["digest"] for a in json.loads(record)["artifacts"]]
        total = sum((store.root / SCOPE.prefix / object_key(d)).stat().st_size for d in digests)
        base_times, restore_times = [], []
        for i in range(args.repeat):
            base_times.append(baseline(store, digests, work / f"baseline-{i}"))
            shutil.rmtree(work / f"baseline-{i}")
            restore_times.append(restore_once(store, session, origin, work / f"attempts-{i}", claude))
            shutil.rmtree(work / f"attempts-{i}")
        b, r = min(base_times), min(restore_times)
        print(f"work folder: {work.parent}")
        print(f"checkpoint: {total / MIB:.0f} MiB in {len(digests)} objects (native session + source)")
        print(f"baseline sha256+copy: {b:.2f} s ({total / MIB / b:.0f} MiB/s)")
        print(f"restore (verify, native, version, source): {r:.2f} s ({total / MIB / r:.0f} MiB/s)")
        print(f"ratio restore/baseline: {r / b:.2f} (target <= 1.5)")
        phases = ", ".join(f"{k} {min(v):.2f} s" for k, v in PHASES.items())
        print(f"restore phases (best of each; 'native' includes the version check): {phases}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
