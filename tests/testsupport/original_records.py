"""Records shaped as the original swarm v2 writes them, built by hand from the facts in COMPAT.md.

Nothing here comes from this product's writers: the compatibility suite
(``tests/compat``) feeds these to the product's readers. Each builder returns
plain JSON data; ``commit_original`` stores a manifest's exact bytes (not
re-encoded) with the objects it lists, as another writer would.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from agentihooks_checkpoint.layout import object_key
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores.base import CheckpointStore

#: The three fields the original's older schema never required and its newer one requires at every minor.
QUIESCENCE_FIELDS = ("quiescence_method", "dependencies_manifest", "restore_constraints")
EXECUTION = "exe-" + "0" * 31 + "1"
TRANSCRIPT = b'{"type": "user", "seq": 0, "text": "hello"}\n{"type": "assistant", "seq": 1, "text": "hi"}\n'


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def original_manifest(
    minor: int = 1,
    *,
    newer_schema: bool = True,
    execution_id: str = EXECUTION,
    task_id: str = "task-1",
    task_generation: int = 1,
    checkpoint_id: str = "ckpt-orig-1",
    sequence: int = 3,
    transcript: bytes = TRANSCRIPT,
    **extra: Any,
) -> dict[str, Any]:
    """A committed context-only checkpoint manifest as the original writes it at ``2.<minor>``.

    ``newer_schema`` carries the three quiescence fields (the original's newer schema); without
    it they are absent (its older schema). There is no ``authority.execution_generation``,
    ``compatibility_key``, ``harness`` or ``artifacts`` inventory: the original has none of them.
    Base and head commit are equal, so the transcript is the only required artifact.
    ``extra`` adds or replaces top-level fields (a newer minor's optional fields, for instance).
    """
    commit = "a" * 40
    rec: dict[str, Any] = {
        "schema_version": f"2.{minor}",
        "operation_id": f"op-{checkpoint_id}",
        "authority": {
            "execution_id": execution_id,
            "task_id": task_id,
            "task_generation": task_generation,
            "project_id": "github.com/example/repo",
        },
        "checkpoint_id": checkpoint_id,
        "checkpoint_sequence": sequence,
        "status": "complete",
        "created_at": "2026-11-30T08:00:00Z",
        "committed_at": "2026-11-30T08:00:02.25Z",
        "native_resume_capability": "unsupported",
        "base_commit": commit,
        "head_commit": commit,
        "branch_name": "swarm/task-1",
        "transcript_durable_cursor": {
            "sequence": transcript.count(b"\n") - 1,
            "byte_offset": len(transcript),
        },
        "artifact_hashes": {"transcript": digest(transcript)},
        "exclusions": [".env"],
        "native_session_id": None,
    }
    if minor >= 1:
        rec["trace_id"] = "0123456789abcdef0123456789abcdef"
    if newer_schema:
        rec.update(
            quiescence_method="stopped_process",
            dependencies_manifest={"python": "3.11"},
            restore_constraints=["same-project"],
        )
    rec.update(extra)
    return rec


def manifest_bytes(rec: dict[str, Any]) -> bytes:
    """Bytes as another writer might lay them out: indented, keys in its own order, not ours."""
    return json.dumps(rec, indent=2).encode("utf-8")


def commit_original(
    store: CheckpointStore, scope: StoreScope, rec: dict[str, Any], *, transcript: bytes = TRANSCRIPT
) -> bytes:
    """Store the transcript object, the manifest's exact bytes and the commit pointer; return the bytes."""
    store.write_bytes(scope, object_key(digest(transcript)), transcript)
    data = manifest_bytes(rec)
    store.write_manifest(scope, rec["checkpoint_id"], data)
    store.commit_written(scope, rec["checkpoint_id"], data)
    return data


def original_pod(
    execution_id: str,
    swarm: str,
    *,
    owner: str | None = None,
    phase: str = "Running",
    container_state: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A worker Pod as the original's controller creates it (labels, annotations, container ``agent``)."""
    d = "swarm.agentihooks.io"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"swarm-{execution_id}",
            "namespace": "default",
            "labels": {
                f"{d}/controller-owner": owner if owner is not None else f"agentihooks-swarm-{swarm}",
                f"{d}/execution-id": execution_id,
                f"{d}/generation": "1",
                f"{d}/swarm": swarm,
                f"{d}/task": "task-1",
            },
            "annotations": {
                f"{d}/seat": "eng-1",
                f"{d}/grant-ref": "lgr-" + "0" * 32,
                f"{d}/controller-epoch": "1",
                f"{d}/project": "github.com/example/repo",
                f"{d}/harness": "claude",
            },
        },
        "spec": {"restartPolicy": "Never", "nodeName": "node-1", "containers": [{"name": "agent"}]},
        "status": {
            "phase": phase,
            "containerStatuses": [
                {
                    "name": "agent",
                    "state": container_state or {"running": {"startedAt": "2026-11-30T08:00:00Z"}},
                }
            ],
        },
    }


def original_launch_record(**authority: Any) -> dict[str, Any]:
    """``launch.json`` as the original mounts it (``schema_version: 1``, no additions of this product)."""
    auth = {
        "execution_id": EXECUTION,
        "generation": 1,
        "task_id": "task-1",
        "seat_id": "eng-1",
        "swarm_id": "swarm-a",
        "grant_id": "lgr-" + "0" * 32,
    }
    auth.update(authority)
    return {
        "schema_version": 1,
        "authority": auth,
        "harness": "claude",
        "agent": ["claude"],
        "startup_seconds": 10,
        "quiesce_seconds": 10,
        "checkpoint_seconds": 10,
        "kill_seconds": 2,
    }
