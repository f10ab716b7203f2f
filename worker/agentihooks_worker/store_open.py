"""Open the store chosen at boot (see ``store_select``) as a ``CheckpointStore``.

Local folders and buckets are opened directly. With ``checkpoint_remote: true``
the worker holds no storage credentials: it goes through the controller's
scoped routes with its own worker credential (``AGENTIHOOKS_WORKER_TOKEN``),
and sets ``AGENTIHOOKS_CHECKPOINT_REMOTE=true`` for itself.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from agentihooks_checkpoint.launch import LaunchRecord
from agentihooks_checkpoint.stores.base import CheckpointStore
from agentihooks_checkpoint.stores.local import LocalStore
from agentihooks_checkpoint.stores.remote import TOKEN_ENV, ControlReporter, RemoteStore
from agentihooks_checkpoint.stores.s3 import S3Store

from .errors import StoreSelectionError
from .settings import WorkerSettings
from .store_select import choose_store

REMOTE_ENV = "AGENTIHOOKS_CHECKPOINT_REMOTE"


def worker_token(environ: Mapping[str, str]) -> str:
    token = environ.get(TOKEN_ENV, "")
    if not token:
        raise StoreSelectionError(f"checkpoint_remote is true but {TOKEN_ENV} holds no worker credential")
    return token


def open_store(
    settings: WorkerSettings, launch: LaunchRecord, environ: Mapping[str, str]
) -> CheckpointStore | None:
    """The store this attempt reads and writes, or ``None`` when none is configured."""
    choice = choose_store(settings, remote=launch.checkpoint_remote, control_url=launch.control_url)
    if choice is None:
        return None
    if choice.kind == "remote":
        os.environ[REMOTE_ENV] = "true"
        return RemoteStore(
            choice.location,
            launch.authority.execution_id,
            worker_token(environ),
            retry_seconds=settings.control_retry_seconds,
        )
    if choice.kind == "bucket":
        import boto3

        client = boto3.client("s3", endpoint_url=settings.checkpoint_endpoint)
        return S3Store(choice.location, client, prefix=settings.checkpoint_prefix)
    return LocalStore(Path(choice.location))


def control_reporter(
    launch: LaunchRecord, environ: Mapping[str, str], settings: WorkerSettings | None = None
) -> ControlReporter | None:
    """The reporter to the controller of any launch that names a control URL (whatever its store):
    the outcome, the session and archive watermark the fence records, a refusal. ``None`` without a
    control URL, or without a worker credential outside ``checkpoint_remote`` (a remote launch
    without one is refused by :func:`worker_token`)."""
    if launch.control_url is None:
        return None
    if not launch.checkpoint_remote and not environ.get(TOKEN_ENV):
        return None
    retry = settings.control_retry_seconds if settings is not None else WorkerSettings().control_retry_seconds
    return ControlReporter(
        launch.control_url,
        launch.authority.execution_id,
        worker_token(environ),
        retry_seconds=retry,
        quick_progress=not launch.checkpoint_remote,
    )
