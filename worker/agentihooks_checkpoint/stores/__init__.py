"""Checkpoint stores: a local folder, an S3 bucket, and the interface both implement.

A later controller-proxied store implements the same :class:`CheckpointStore`
primitives and inherits the object, commit and listing logic unchanged.
"""

from __future__ import annotations

from .base import CheckpointStore, StoredObject
from .env import store_from_env
from .local import LocalStore
from .s3 import S3Store

__all__ = ["CheckpointStore", "LocalStore", "S3Store", "StoredObject", "store_from_env"]
