"""Capture on real git repos and files: what lands in the store restores the same bytes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from agentihooks_checkpoint.errors import CaptureError
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores import LocalStore
from agentihooks_checkpoint.validator import Validator
from agentihooks_checkpoint.verdict import Verdict
from agentihooks_worker.capture import CaptureRequest, capture
from testsupport.checkpoints import (
    BuiltCheckpoint,
    Kind,
    build_checkpoint,
    claude_project_dir,
    make_repo,
    run_git,
)

SCOPE = StoreScope(swarm="swarm-a", task_id="task-1", task_generation=1)


def verified(store: LocalStore, b: BuiltCheckpoint, stage: Path) -> Verdict:
    v = Validator().verify(
        store,
        SCOPE,
        b.checkpoint_id,
        execution_id=b.execution_id,
        execution_generation=b.execution_generation,
        stage_dir=stage,
    )
    assert v.ok, str(v)
    return v


@pytest.mark.parametrize("kind", ["claude", "codex", "context"])
def test_each_kind_restores_its_bytes(tmp_path: Path, kind: Kind) -> None:
    store = LocalStore(tmp_path / "store")
    b = build_checkpoint(store, SCOPE, tmp_path / "w", kind=kind, session_id=None)
    v = verified(store, b, tmp_path / "stage")
    assert v.staged is not None and v.record is not None
    staged = v.staged.artifacts
    transcript = staged["transcript"].path.read_bytes()
    assert transcript == b.transcript.read_bytes()
    assert "\u2028".encode() in transcript and "\u2029".encode() in transcript
    for obj in (store.root / SCOPE.prefix / "objects/sha256").iterdir():
        assert obj.stat().st_mode & 0o777 == 0o600
    assert v.record.watermark == b.watermark
    assert v.record.compatibility_key == b.compatibility_key
    if kind == "context":
        assert "native_session" not in staged and not v.record.native
        assert v.record.native_resume_capability == "unsupported"
        return
    assert v.record.native and v.record.native_session_id == b.session_id
    home = tmp_path / "new-home"
    home.mkdir()
    written = staged["native_session"].extract_to(home)
    assert [p.relative_to(home).as_posix() for p in written] == b.native_files
    assert written[0].read_bytes() == (b.home / b.native_files[0]).read_bytes()
    assert written[0].stat().st_mode & 0o777 == 0o600
    if kind == "claude":
        assert b.native_files[0] == f".claude/projects/{claude_project_dir(b.worktree)}/{b.session_id}.jsonl"
    else:
        first = json.loads(written[0].read_bytes().split(b"\n", 1)[0])
        assert first["type"] == "session_meta" and first["payload"]["id"] == b.session_id
        assert b.native_files[0].endswith(f"-{b.session_id}.jsonl")


def test_source_round_trip_through_bundle_patch_and_untracked(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    b = build_checkpoint(store, SCOPE, tmp_path / "w", kind="context", commits_since_base=2)
    staged = verified(store, b, tmp_path / "stage").staged
    assert staged is not None
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(b.worktree), str(clone)], check=True)
    run_git(clone, "checkout", "-q", "--detach", b.base_commit)
    run_git(
        clone, "fetch", "-q", str(staged.artifacts["git_bundle"].path), "refs/heads/task:refs/heads/restored"
    )
    run_git(clone, "checkout", "-q", "restored")
    assert run_git(clone, "rev-parse", "HEAD") == b.head_commit
    run_git(clone, "apply", "--binary", str(staged.artifacts["source_patch"].path))
    staged.artifacts["untracked"].extract_to(clone)
    for rel in ["README.md", "data.bin", "notes/untracked.md", "work-0.txt", "work-1.txt"]:
        assert (clone / rel).read_bytes() == (b.worktree / rel).read_bytes(), rel
    assert not (clone / "ignored.log").exists()


def test_base_equal_to_head_and_clean_worktree_need_no_source_objects(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    b = build_checkpoint(store, SCOPE, tmp_path / "w", kind="claude", commits_since_base=0, dirty=False)
    assert b.record.base_commit == b.record.head_commit
    assert set(b.record.artifact_hashes) == {"transcript", "native_session"}
    verified(store, b, tmp_path / "stage")


def request(tmp_path: Path, **kw: object) -> CaptureRequest:
    repo = tmp_path / "repo"
    if not repo.exists():
        make_repo(repo)
        (tmp_path / "t.jsonl").write_bytes(b'{"x": 1}\n')
        (tmp_path / "home").mkdir()
    fields: dict[str, object] = {
        "scope": SCOPE,
        "checkpoint_id": "ckpt-1",
        "checkpoint_sequence": 1,
        "execution_id": "exe-1",
        "execution_generation": 1,
        "project_id": "local:x",
        "harness": "claude",
        "compatibility_key": "worker:1",
        "transcript": tmp_path / "t.jsonl",
        "watermark": 0,
        "worktree": repo,
        "harness_home": tmp_path / "home",
        "base_commit": run_git(repo, "rev-list", "--max-parents=0", "HEAD"),
    }
    fields.update(kw)
    return CaptureRequest.model_validate(fields)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"native_files": ["../outside.jsonl"], "native_session_id": "s"}, "not relative"),
        ({"native_files": ["/etc/passwd"], "native_session_id": "s"}, "not relative"),
        ({"native_files": ["missing.jsonl"], "native_session_id": "s"}, "missing"),
        ({"native_files": ["a.jsonl"]}, "session id"),
        ({"base_commit": "f" * 40}, "ancestor"),
        ({"branch_name": "main"}, "branch does not point"),
        ({"transcript": Path("/nonexistent/t.jsonl")}, "transcript"),
    ],
)
def test_capture_refusals_commit_nothing(tmp_path: Path, kw: dict[str, object], message: str) -> None:
    store = LocalStore(tmp_path / "store")
    req = request(tmp_path, **kw)
    with pytest.raises(CaptureError, match=message):
        capture(store, req, work_dir=tmp_path)
    assert store.list_checkpoints(SCOPE) == []
    assert not list(tmp_path.glob("capture-*"))


def test_native_symlink_is_refused(tmp_path: Path) -> None:
    req = request(tmp_path, native_files=["link.jsonl"], native_session_id="s")
    (tmp_path / "home" / "link.jsonl").symlink_to(tmp_path / "t.jsonl")
    with pytest.raises(CaptureError):
        capture(LocalStore(tmp_path / "store"), req)


def test_commit_is_write_once(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    first = capture(store, request(tmp_path))
    with pytest.raises(CaptureError, match="already committed"):
        capture(store, request(tmp_path, watermark=5))
    [summary] = store.list_checkpoints(SCOPE)
    assert summary.watermark == 0
    assert Validator().verify(store, SCOPE, "ckpt-1", execution_id="exe-1", execution_generation=1).ok
    assert first.record.watermark == 0


def cli_env(root: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTIHOOKS_CHECKPOINT")}
    env["AGENTIHOOKS_CHECKPOINT_ROOT"] = root
    return env


def cli_args(tmp_path: Path) -> list[str]:
    request(tmp_path)  # builds repo and transcript
    return [
        "agentihooks-worker", "capture", "--swarm", "swarm-a", "--task-id", "task-1",
        "--task-generation", "1", "--checkpoint-id", "ckpt-cli", "--sequence", "4",
        "--execution-id", "exe-cli", "--execution-generation", "2",
        "--project-id", "local:x", "--harness", "codex", "--compatibility-key", "worker:9",
        "--transcript", str(tmp_path / "t.jsonl"), "--watermark", "0", "--worktree", str(tmp_path / "repo"),
    ]  # fmt: skip


def test_capture_command(tmp_path: Path) -> None:
    args = cli_args(tmp_path)
    rel = ".codex/sessions/2026/11/30/rollout-2026-11-30T08-00-00-0a1b2c3d-0000-4000-8000-000000000001.jsonl"
    (tmp_path / "home" / rel).parent.mkdir(parents=True)
    (tmp_path / "home" / rel).write_bytes(b'{"type":"session_meta"}\n')
    args += ["--home", str(tmp_path / "home"), "--native-file", rel, "--harness-version", "0.162.0"]
    args += ["--session-id", "0a1b2c3d-0000-4000-8000-000000000001"]
    out = subprocess.run(args, env=cli_env(str(tmp_path / "store")), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["checkpoint_id"] == "ckpt-cli" and len(result["manifest_sha256"]) == 64
    store = LocalStore(tmp_path / "store")
    [summary] = store.list_checkpoints(SCOPE)
    assert (summary.harness, summary.execution_generation, summary.compatibility_key) == (
        "codex",
        2,
        "worker:9",
    )
    assert summary.native and summary.native_session_id == "0a1b2c3d-0000-4000-8000-000000000001"
    assert Validator().verify(store, SCOPE, "ckpt-cli", execution_id="exe-cli", execution_generation=2).ok


def test_capture_command_refuses_a_relative_root(tmp_path: Path) -> None:
    out = subprocess.run(
        cli_args(tmp_path), env=cli_env("rel/store"), capture_output=True, text=True, cwd=tmp_path
    )
    assert out.returncode == 1
    assert "AGENTIHOOKS_CHECKPOINT_ROOT must be an absolute path" in out.stderr
    assert not (tmp_path / "rel").exists()


KILLER = """
import os, signal, sys
from pathlib import Path
from agentihooks_checkpoint.stores import LocalStore
from agentihooks_worker.capture import CaptureRequest, capture
req = CaptureRequest.model_validate_json(sys.argv[1])
at = sys.argv[3]
def on_step(step):
    if step == at:
        os.kill(os.getpid(), signal.SIGKILL)
capture(LocalStore(Path(sys.argv[2])), req, on_step=on_step)
"""


@pytest.mark.parametrize("at", ["uploaded:transcript", "uploaded:git_bundle", "verified", "manifest_written"])
def test_killed_capture_leaves_no_checkpoint_and_can_run_again(tmp_path: Path, at: str) -> None:
    req = request(tmp_path)
    root = tmp_path / "store"
    proc = subprocess.run(
        [sys.executable, "-c", KILLER, req.model_dump_json(), str(root), at], capture_output=True
    )
    assert proc.returncode == -9, proc.stderr
    store = LocalStore(root)
    assert store.list_checkpoints(SCOPE) == []
    v = Validator().verify(store, SCOPE, "ckpt-1", execution_id="exe-1", execution_generation=1)
    assert str(v) == "manifest_absent"
    capture(store, req)
    [summary] = store.list_checkpoints(SCOPE)
    assert summary.complete
    assert Validator().verify(store, SCOPE, "ckpt-1", execution_id="exe-1", execution_generation=1).ok


def test_killed_right_after_commit_is_committed_once(tmp_path: Path) -> None:
    req = request(tmp_path)
    root = tmp_path / "store"
    proc = subprocess.run([sys.executable, "-c", KILLER, req.model_dump_json(), str(root), "committed"])
    assert proc.returncode == -9
    store = LocalStore(root)
    assert [s.checkpoint_id for s in store.list_checkpoints(SCOPE)] == ["ckpt-1"]
    with pytest.raises(CaptureError):
        capture(store, req)
    assert len(store.list_checkpoints(SCOPE)) == 1


def test_capture_command_names_bad_arguments(tmp_path: Path) -> None:
    args = cli_args(tmp_path)
    args[args.index("--harness") + 1] = "gemini"
    out = subprocess.run(args, env=cli_env(str(tmp_path / "store")), capture_output=True, text=True)
    assert out.returncode == 2
    assert "harness" in out.stderr
    assert not (tmp_path / "store").exists()
