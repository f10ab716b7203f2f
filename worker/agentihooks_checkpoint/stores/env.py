"""Choose the checkpoint store from the environment.

``AGENTIHOOKS_CHECKPOINT_BUCKET`` (S3, optional ``AGENTIHOOKS_CHECKPOINT_ENDPOINT``
and ``AGENTIHOOKS_CHECKPOINT_PREFIX``) takes precedence over
``AGENTIHOOKS_CHECKPOINT_ROOT`` (an absolute folder). Neither: ``None``, and
callers use :class:`~agentihooks_checkpoint.catalog.EmptyCatalog`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import StoreConfigError
from .base import CheckpointStore
from .local import LocalStore
from .s3 import S3Store

BUCKET = "AGENTIHOOKS_CHECKPOINT_BUCKET"
ROOT = "AGENTIHOOKS_CHECKPOINT_ROOT"
ENDPOINT = "AGENTIHOOKS_CHECKPOINT_ENDPOINT"
PREFIX = "AGENTIHOOKS_CHECKPOINT_PREFIX"


def store_from_env(environ: Mapping[str, str], *, s3_client: Any | None = None) -> CheckpointStore | None:
    """The configured store, ``None`` when none is, or :class:`StoreConfigError` naming the bad setting.

    A relative root is refused even beside a bucket, which would win: a setting that could never
    work is an error to fix, not one to ignore until the bucket is removed."""
    bucket = environ.get(BUCKET, "").strip()
    root = environ.get(ROOT, "").strip()
    if root and not Path(root).is_absolute():
        raise StoreConfigError(f"{ROOT} must be an absolute path, got a relative one: {root!r}")
    if bucket:
        client = s3_client
        if client is None:
            import boto3

            endpoint = environ.get(ENDPOINT, "").strip() or None
            client = boto3.client("s3", endpoint_url=endpoint)
        return S3Store(bucket, client, prefix=environ.get(PREFIX, ""))
    if root:
        return LocalStore(Path(root))
    return None
