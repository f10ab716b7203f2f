"""Open the store chosen at boot (see ``store_select``) as a ``CheckpointStore``.

Local folders and buckets are opened directly. The controller's scoped routes
(``checkpoint_remote: true``) need the control API client, which this build
does not have yet: such a launch is refused, never run without its store.
"""

from __future__ import annotations

import os
from pathlib import Path

from agentihooks_checkpoint.launch import LaunchRecord
from agentihooks_checkpoint.stores.base import CheckpointStore
from agentihooks_checkpoint.stores.local import LocalStore
from agentihooks_checkpoint.stores.s3 import S3Store

from .errors import Refused
from .settings import WorkerSettings
from .store_select import choose_store

REMOTE_ENV = "AGENTIHOOKS_CHECKPOINT_REMOTE"


def open_store(settings: WorkerSettings, launch: LaunchRecord) -> CheckpointStore | None:
    """The store this attempt reads and writes, or ``None`` when none is configured."""
    choice = choose_store(settings, remote=launch.checkpoint_remote, control_url=launch.control_url)
    if choice is None:
        return None
    if choice.kind == "remote":
        os.environ[REMOTE_ENV] = "true"
        raise Refused(
            "checkpoint_remote_unavailable",
            "checkpoint_remote is not supported by this worker build yet",
        )
    if choice.kind == "bucket":
        import boto3

        client = boto3.client("s3", endpoint_url=settings.checkpoint_endpoint)
        return S3Store(choice.location, client, prefix=settings.checkpoint_prefix)
    return LocalStore(Path(choice.location))
