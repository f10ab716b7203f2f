"""A checkpoint store in an S3 bucket, through a boto3 client.

S3 PUTs are atomic per object. The commit pointer is written with a
conditional PUT (``If-None-Match: *``), so a second commit of the same
checkpoint fails instead of replacing the first.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, cast

from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

from ..errors import CheckpointExists, ObjectMissing, StoreError, StoreUnreachable
from ..scope import StoreScope
from .base import CheckpointStore

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

_MISSING = {"404", "NoSuchKey", "NotFound"}


def _code(e: ClientError) -> str:
    return str(e.response.get("Error", {}).get("Code", ""))


def _failed(e: BotoCoreError | ClientError | OSError, what: str) -> StoreError:
    """No answer (connection, timeout) or a 5xx: :class:`StoreUnreachable`; else :class:`StoreError`."""
    if isinstance(e, (BotoConnectionError, HTTPClientError, OSError)):
        return StoreUnreachable(f"{what}: the bucket's endpoint cannot be reached")
    if isinstance(e, ClientError):
        status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if isinstance(status, int) and status >= 500:
            return StoreUnreachable(f"{what}: the bucket's endpoint is unavailable")
    return StoreError(what)


class _Body:
    """A response body whose read errors surface as :class:`StoreError`."""

    def __init__(self, body: Any) -> None:
        self._body = body

    def read(self, n: int = -1) -> bytes:
        try:
            data: bytes = self._body.read(n if n >= 0 else None)
        except (BotoCoreError, OSError) as e:
            raise _failed(e, "object read was interrupted") from e
        return data


class S3Store(CheckpointStore):
    """Checkpoints in ``bucket`` under an optional key ``prefix``."""

    max_concurrency = 8

    def __init__(self, bucket: str, client: S3Client | Any, *, prefix: str = "") -> None:
        self.bucket = bucket
        self.client = cast("S3Client", client)
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""

    def __repr__(self) -> str:
        return "S3Store()"

    def _key(self, scope: StoreScope, key: str) -> str:
        if not key or any(p in {"", ".", ".."} for p in key.split("/")):
            raise StoreError("not a store key")
        return f"{self.prefix}{scope.prefix}{key}"

    def open_read(self, scope: StoreScope, key: str) -> AbstractContextManager[BinaryIO]:
        return self._open(self._key(scope, key))

    @contextmanager
    def _open(self, key: str) -> Iterator[BinaryIO]:
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"]
        except ClientError as e:
            if _code(e) in _MISSING:
                raise ObjectMissing("no such object") from e
            raise _failed(e, "object cannot be read") from e
        except BotoCoreError as e:
            raise _failed(e, "object cannot be read") from e
        try:
            yield cast(BinaryIO, _Body(body))
        finally:
            body.close()

    def _head(self, scope: StoreScope, key: str) -> dict[str, Any] | None:
        """The object's HEAD answer, or ``None`` when it is absent."""
        try:
            return dict(self.client.head_object(Bucket=self.bucket, Key=self._key(scope, key)))
        except ClientError as e:
            if _code(e) in _MISSING:
                return None
            raise _failed(e, "object cannot be inspected") from e
        except BotoCoreError as e:
            raise _failed(e, "object cannot be inspected") from e

    def identity(self, scope: StoreScope, key: str) -> str | None:
        """The object's ETag, version id and last-modified time (a HEAD): any overwrite changes them."""
        head = self._head(scope, key)
        if head is None:
            return None
        modified = head.get("LastModified")
        return f"{head.get('ETag')}|{head.get('VersionId', '')}|{modified.isoformat() if modified else ''}"

    def delete(self, scope: StoreScope, key: str) -> None:
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self._key(scope, key))
        except (ClientError, BotoCoreError) as e:
            raise _failed(e, "object cannot be deleted") from e

    def modified_at(self, scope: StoreScope, key: str) -> float | None:
        head = self._head(scope, key)
        return None if head is None else float(head["LastModified"].timestamp())

    def size_of(self, scope: StoreScope, key: str) -> int | None:
        head = self._head(scope, key)
        return None if head is None else int(head["ContentLength"])

    def write_file(self, scope: StoreScope, key: str, path: Path) -> None:
        try:
            self.client.upload_file(str(path), self.bucket, self._key(scope, key))
        except (ClientError, BotoCoreError, OSError) as e:
            raise StoreError("object upload failed") from e

    def write_bytes(self, scope: StoreScope, key: str, data: bytes) -> None:
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(scope, key), Body=data)
        except (ClientError, BotoCoreError) as e:
            raise StoreError("object upload failed") from e

    def write_once(self, scope: StoreScope, key: str, data: bytes) -> None:
        full = self._key(scope, key)
        try:
            self.client.put_object(Bucket=self.bucket, Key=full, Body=data, IfNoneMatch="*")
        except ClientError as e:
            if _code(e) in {"PreconditionFailed", "412", "ConditionalRequestConflict"}:
                raise CheckpointExists("this checkpoint is already committed") from e
            raise StoreError("commit failed") from e
        except BotoCoreError as e:
            raise StoreError("commit failed") from e

    def list_keys(self, scope: StoreScope, under: str) -> list[str]:
        base = f"{self.prefix}{scope.prefix}"
        out: list[str] = []
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=base + under
            )
            for page in pages:
                for obj in page.get("Contents", []):
                    out.append(obj["Key"][len(base) :])
        except (ClientError, BotoCoreError) as e:
            raise StoreError("listing failed") from e
        return out
