"""Fixture factory: real, valid checkpoints of each kind, built by the real capture code.

``build_checkpoint(store, scope, workdir, kind=...)`` makes a real git repo
(base commit, one or more commits on a branch, a dirty tracked file, an
untracked file, an ignored file), a harness home holding the native session
files the real harness would write, and a transcript holding raw U+2028 and
U+2029, then captures them into ``store`` under ``scope``:

* ``kind="claude"``: ``<home>/.claude/projects/<cwd with every char outside
  [A-Za-z0-9] replaced by '-'>/<session-id>.jsonl``; the transcript is that file.
* ``kind="codex"``: ``<home>/.codex/sessions/YYYY/MM/DD/rollout-<local time>-<uuid>.jsonl``
  whose first line is a ``session_meta`` record (``id``, ``cwd``, ``cli_version``).
* ``kind="context"``: no native files; ``native_resume_capability`` is
  ``unsupported`` and the transcript is a plain archived transcript.

Later issues (recovery core, worker restore, demo) reuse it; keep the
signature stable and add keyword parameters only.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal

from agentihooks_checkpoint.model import CheckpointRecord
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores.base import CheckpointStore
from agentihooks_worker.capture import CaptureRequest, capture

Kind = Literal["claude", "codex", "context"]
CLAUDE_VERSION = "2.1.295"
CODEX_VERSION = "0.162.0"
#: A line with raw LINE SEPARATOR and PARAGRAPH SEPARATOR inside a JSON string.
SEPARATORS_TEXT = "before\u2028middle\u2029after"


@dataclass(frozen=True)
class BuiltCheckpoint:
    """What was captured, for assertions and for restoring it again."""

    kind: Kind
    scope: StoreScope
    checkpoint_id: str
    execution_id: str
    execution_generation: int
    record: CheckpointRecord
    manifest_sha256: str
    session_id: str | None
    watermark: int
    compatibility_key: str
    home: Path
    worktree: Path
    transcript: Path
    #: Native session files, relative to ``home``.
    native_files: list[str] = field(default_factory=list)
    base_commit: str = ""
    head_commit: str = ""


def claude_project_dir(cwd: Path | str) -> str:
    """Claude Code's project folder name for a working directory."""
    return re.sub(r"[^A-Za-z0-9]", "-", str(cwd))


def run_git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "fixture",
        "GIT_AUTHOR_EMAIL": "fixture@example.invalid",
        "GIT_COMMITTER_NAME": "fixture",
        "GIT_COMMITTER_EMAIL": "fixture@example.invalid",
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(repo),
        "PATH": "/usr/bin:/bin:/usr/local/bin",
    }
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


def make_repo(
    path: Path, *, commits_since_base: int = 1, dirty: bool = True, branch: str = "task"
) -> tuple[str, str]:
    """A real repo: base commit, then ``commits_since_base`` commits on ``branch``; returns (base, head)."""
    path.mkdir(parents=True, exist_ok=True)
    run_git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("fixture project\n")
    (path / ".gitignore").write_text("ignored.log\n")
    (path / "data.bin").write_bytes(bytes(range(256)))
    run_git(path, "add", "-A")
    run_git(path, "commit", "-q", "-m", "base")
    base = run_git(path, "rev-parse", "HEAD")
    run_git(path, "checkout", "-q", "-b", branch)
    for i in range(commits_since_base):
        (path / f"work-{i}.txt").write_text(f"committed work {i}\n")
        run_git(path, "add", "-A")
        run_git(path, "commit", "-q", "-m", f"work {i}")
    head = run_git(path, "rev-parse", "HEAD")
    if dirty:
        (path / "README.md").write_text("fixture project\nuncommitted edit\n")
        (path / "data.bin").write_bytes(bytes(range(255, -1, -1)))
        (path / "notes").mkdir(exist_ok=True)
        (path / "notes" / "untracked.md").write_text("untracked note\n")
        (path / "ignored.log").write_text("never captured\n")
    return base, head


def transcript_lines(n: int, session_id: str | None) -> list[bytes]:
    """``n`` JSONL records; record 1 carries raw U+2028/U+2029 (ensure_ascii off)."""
    lines = []
    for i in range(n):
        text = SEPARATORS_TEXT if i == 1 else f"message {i}"
        rec = {"type": "user" if i % 2 == 0 else "assistant", "seq": i, "sessionId": session_id, "text": text}
        lines.append(json.dumps(rec, ensure_ascii=False).encode("utf-8"))
    return lines


def build_checkpoint(
    store: CheckpointStore,
    scope: StoreScope,
    workdir: Path,
    *,
    kind: Kind = "claude",
    checkpoint_id: str = "ckpt-1",
    sequence: int = 1,
    execution_id: str | None = None,
    execution_generation: int = 1,
    compatibility_key: str = "worker:1.0.0",
    session_id: str | None = None,
    watermark: int | None = None,
    records: int = 6,
    project_id: str = "local:fixture",
    harness_version: str | None = None,
    commits_since_base: int = 1,
    dirty: bool = True,
) -> BuiltCheckpoint:
    """Build and commit one checkpoint; ``workdir`` receives the repo, the home and the transcript.

    ``watermark`` defaults to the last record's index; ``session_id`` to a new UUID for native kinds.
    ``execution_id`` defaults to ``exe-<32 hex>``. Call it again with another ``workdir`` (or
    ``checkpoint_id``) for more checkpoints.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    execution_id = execution_id or f"exe-{uuid.uuid4().hex}"
    worktree = workdir / "worktree"
    home = workdir / "home"
    home.mkdir(exist_ok=True)
    if not (worktree / ".git").exists():
        base, head = make_repo(worktree, commits_since_base=commits_since_base, dirty=dirty)
    else:
        head = run_git(worktree, "rev-parse", "HEAD")
        base = run_git(worktree, "rev-list", "--max-parents=0", "HEAD").splitlines()[0]
    native: list[str] = []
    harness: Literal["claude", "codex"] = "codex" if kind == "codex" else "claude"
    if kind == "context":
        session_id = None
        transcript = workdir / "transcript.jsonl"
        transcript.write_bytes(b"\n".join(transcript_lines(records, None)) + b"\n")
    else:
        session_id = session_id or str(uuid.uuid4())
        if kind == "claude":
            rel = f".claude/projects/{claude_project_dir(worktree)}/{session_id}.jsonl"
            body = transcript_lines(records, session_id)
            harness_version = harness_version or CLAUDE_VERSION
        else:
            now = datetime.now()
            rel = f".codex/sessions/{now:%Y/%m/%d}/rollout-{now:%Y-%m-%dT%H-%M-%S}-{session_id}.jsonl"
            harness_version = harness_version or CODEX_VERSION
            meta = {
                "timestamp": now.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
                "type": "session_meta",
                "payload": {"id": session_id, "cwd": str(worktree), "cli_version": harness_version},
            }
            body = [json.dumps(meta).encode(), *transcript_lines(records - 1, session_id)]
        transcript = home / rel
        transcript.parent.mkdir(parents=True, exist_ok=True)
        transcript.write_bytes(b"\n".join(body) + b"\n")
        native = [rel]
    wm = records - 1 if watermark is None else watermark
    req = CaptureRequest(
        scope=scope,
        checkpoint_id=checkpoint_id,
        checkpoint_sequence=sequence,
        execution_id=execution_id,
        execution_generation=execution_generation,
        project_id=project_id,
        harness=harness,
        compatibility_key=compatibility_key,
        transcript=transcript,
        watermark=wm,
        worktree=worktree,
        base_commit=base,
        harness_home=home,
        native_files=native,
        native_session_id=session_id,
        native_harness_version=harness_version if native else None,
    )
    result = capture(store, req, work_dir=workdir)
    return BuiltCheckpoint(
        kind=kind,
        scope=scope,
        checkpoint_id=checkpoint_id,
        execution_id=execution_id,
        execution_generation=execution_generation,
        record=result.record,
        manifest_sha256=result.manifest_sha256,
        session_id=session_id,
        watermark=wm,
        compatibility_key=compatibility_key,
        home=home,
        worktree=worktree,
        transcript=transcript,
        native_files=native,
        base_commit=base,
        head_commit=head,
    )


def sample_record(minor: int = 2, **overrides: object) -> dict[str, object]:
    """A valid record dict of minor ``minor`` (0, 1, 2 or later); ``overrides`` replace top-level fields.

    Pure data (no store): for schema and model tests. Digests are of b"t", b"b".
    """
    import hashlib

    t = "sha256:" + hashlib.sha256(b"t").hexdigest()
    b = "sha256:" + hashlib.sha256(b"b").hexdigest()
    rec: dict[str, object] = {
        "schema_version": f"2.{minor}",
        "operation_id": "op-1",
        "authority": {
            "execution_id": "exe-" + "a" * 32,
            "task_id": "task-1",
            "task_generation": 1,
            "project_id": "github.com/example/repo",
        },
        "checkpoint_id": "ckpt-7",
        "checkpoint_sequence": 7,
        "status": "complete",
        "created_at": "2026-11-30T08:00:00Z",
        "committed_at": "2026-11-30T08:00:01.5Z",
        "native_resume_capability": "unsupported",
        "base_commit": "1" * 40,
        "head_commit": "2" * 40,
        "branch_name": "task",
        "transcript_durable_cursor": {"sequence": 412, "byte_offset": 25800},
        "artifact_hashes": {"transcript": t, "git_bundle": b},
        "exclusions": [],
    }
    if minor >= 1:
        rec.update(quiescence_method="stopped_process", dependencies_manifest={}, restore_constraints=[])
    if minor >= 2:
        rec["authority"] = {**rec["authority"], "execution_generation": 2}  # type: ignore[dict-item]
        rec.update(
            compatibility_key="worker:1.0.0",
            harness="claude",
            artifacts=[
                {"role": "transcript", "path": "transcript.jsonl", "size": 1, "digest": t},
                {"role": "git_bundle", "path": "source.bundle", "size": 1, "digest": b},
            ],
        )
    rec.update(overrides)
    return rec


def store_path(store: CheckpointStore, scope: StoreScope, key: str) -> Path:
    """The file behind ``key`` of a LocalStore (tests tamper with it directly)."""
    from agentihooks_checkpoint.stores import LocalStore

    assert isinstance(store, LocalStore)
    return store.root / scope.prefix / key


def recommit(store: CheckpointStore, scope: StoreScope, checkpoint_id: str, data: bytes) -> None:
    """Replace a committed record by ``data`` with a pointer whose hash matches (a hostile writer)."""
    from agentihooks_checkpoint.layout import pointer_key
    from agentihooks_checkpoint.stores import LocalStore, S3Store

    key = pointer_key(checkpoint_id)
    if isinstance(store, LocalStore):
        store_path(store, scope, key).unlink(missing_ok=True)
    elif isinstance(store, S3Store):
        store.client.delete_object(Bucket=store.bucket, Key=f"{store.prefix}{scope.prefix}{key}")
    store.write_manifest(scope, checkpoint_id, data)
    store.commit_written(scope, checkpoint_id, data)


def edit_record(store: CheckpointStore, scope: StoreScope, checkpoint_id: str, edit: object) -> None:
    """Load the committed record as JSON, call ``edit(dict)`` (which mutates it), and recommit it."""
    rec = json.loads(store.read_bytes(scope, store.read_pointer(scope, checkpoint_id)[0], 1 << 20))
    edit(rec)  # type: ignore[operator]
    recommit(store, scope, checkpoint_id, json.dumps(rec).encode())
