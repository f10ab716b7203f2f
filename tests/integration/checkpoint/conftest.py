"""The checkpoint tests' ``any_store``: each test runs on the local store and on a real S3 API (moto)."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest
from agentihooks_checkpoint.stores import LocalStore, S3Store
from agentihooks_checkpoint.stores.base import CheckpointStore


@pytest.fixture(params=["local", "s3"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> CheckpointStore:
    if request.param == "local":
        return LocalStore(tmp_path / "store")
    endpoint = request.getfixturevalue("s3_endpoint")
    bucket = request.getfixturevalue("s3_bucket")
    return S3Store(bucket, boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1"))
