"""``agentihooks-worker capture``: the capture library as a command for exporters and tests.

The store comes from the environment (``AGENTIHOOKS_CHECKPOINT_BUCKET`` or
``AGENTIHOOKS_CHECKPOINT_ROOT``). On success it prints one JSON line with the
checkpoint id and the manifest's sha256; on failure it names what was wrong
and exits 1 with nothing committed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer
from agentihooks_checkpoint.errors import CheckpointError
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores.env import store_from_env
from pydantic import ValidationError

from .build import capture
from .request import CaptureRequest

Opt = typer.Option


def capture_command(  # noqa: PLR0917
    swarm: Annotated[str, Opt(help="Swarm id (store scope).")],
    task_id: Annotated[str, Opt(help="Task id (store scope).")],
    task_generation: Annotated[int, Opt(help="Task generation (store scope).")],
    checkpoint_id: Annotated[str, Opt(help="Id of the new checkpoint.")],
    sequence: Annotated[int, Opt(help="checkpoint_sequence; the newest is the highest.")],
    execution_id: Annotated[str, Opt(help="The capturing attempt's execution id.")],
    execution_generation: Annotated[int, Opt(help="The capturing attempt's generation.")],
    project_id: Annotated[str, Opt(help="github.com/<owner>/<repo>, local:<name> or unknown.")],
    harness: Annotated[str, Opt(help="claude or codex.")],
    compatibility_key: Annotated[str, Opt(help="The worker image tag.")],
    transcript: Annotated[Path, Opt(help="The transcript file (copied byte for byte).")],
    watermark: Annotated[int, Opt(help="Sequence of the last durably archived transcript record.")],
    worktree: Annotated[Path, Opt(help="The task's git worktree.")],
    base_commit: Annotated[str | None, Opt(help="Commit the task started from (default HEAD).")] = None,
    branch: Annotated[str | None, Opt(help="Branch (default: the current one).")] = None,
    home: Annotated[Path | None, Opt(help="Harness home the native files are relative to.")] = None,
    native_file: Annotated[list[str] | None, Opt(help="Native session file, home-relative; repeat.")] = None,
    session_id: Annotated[str | None, Opt(help="Native session id.")] = None,
    harness_version: Annotated[str | None, Opt(help="Harness version the session was written by.")] = None,
    namespace: Annotated[
        str | None, Opt(help="The Swarm's namespace (store scope; omit for the name-only layout).")
    ] = None,
) -> None:
    """Capture a checkpoint and commit it to the configured store."""
    try:
        store = store_from_env(os.environ)
        if store is None:
            raise CheckpointError(
                "no checkpoint store is configured (set AGENTIHOOKS_CHECKPOINT_ROOT or _BUCKET)"
            )
        req = CaptureRequest(
            scope=StoreScope(
                swarm=swarm, task_id=task_id, task_generation=task_generation, namespace=namespace
            ),
            checkpoint_id=checkpoint_id,
            checkpoint_sequence=sequence,
            execution_id=execution_id,
            execution_generation=execution_generation,
            project_id=project_id,
            harness=harness,  # type: ignore[arg-type]
            compatibility_key=compatibility_key,
            transcript=transcript.absolute(),
            watermark=watermark,
            worktree=worktree.absolute(),
            base_commit=base_commit,
            branch_name=branch,
            harness_home=home.absolute() if home else None,
            native_files=native_file or [],
            native_session_id=session_id,
            native_harness_version=harness_version,
        )
        result = capture(store, req)
    except ValidationError as e:
        fields = ", ".join(".".join(map(str, err["loc"])) for err in e.errors())
        typer.echo(f"capture refused: invalid arguments: {fields}", err=True)
        raise typer.Exit(2) from e
    except CheckpointError as e:
        typer.echo(f"capture failed: {e}", err=True)
        raise typer.Exit(1) from e
    typer.echo(json.dumps({"checkpoint_id": checkpoint_id, "manifest_sha256": result.manifest_sha256}))
