"""Reading a checkpoint's objects: one object as a hashed, size-capped stream, or the objects of a
segmented artifact (the record's ``segments``) as one such stream.

A continuous capture stores the transcript and the native session tar as a chain of objects (the
worker's :mod:`agentihooks_worker.capture.segments`). The validator reads them here in order, checking
each object against its own digest and size as its last byte goes by, while its caller hashes the
whole. Small segments are fetched ahead, a few at a time, and shared by the artifacts of one
verification that list them.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import BinaryIO

from .hashing import CHUNK
from .layout import object_key
from .scope import StoreScope
from .stores.base import CheckpointStore


class HashingReader:
    """Reads at most ``limit`` bytes of ``src``, hashing and optionally copying them."""

    def __init__(self, src: BinaryIO, out: BinaryIO | None, limit: int | None) -> None:
        self._src, self._out, self._left = src, out, limit
        self.sha = hashlib.sha256()
        self.count = 0

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            n = CHUNK
        if self._left is not None:
            n = min(n, self._left)
        if n == 0:
            return b""
        data = self._src.read(n)
        if data:
            self.sha.update(data)
            self.count += len(data)
            if self._left is not None:
                self._left -= len(data)
            if self._out is not None:
                self._out.write(data)
        return data

    def drain(self) -> None:
        while self.read(CHUNK):
            pass


class PartCorrupt(Exception):
    """A segment's bytes do not hash to its digest, or are not its size."""


#: Segments at most this large are fetched ahead, this many at a time, while earlier ones are read.
PREFETCH_MAX = 1 << 20
PREFETCH_AHEAD = 8


class Prefetch:
    """Small segments of one verification, fetched ahead on a few threads and shared by the artifacts
    that list them (the native session tar lists the transcript's own segments): each is read from
    the store once per verification."""

    def __init__(self, store: CheckpointStore, scope: StoreScope) -> None:
        self._store, self._scope = store, scope
        workers = min(PREFETCH_AHEAD, store.max_concurrency)
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="segments") if workers > 1 else None
        self._fetched: dict[str, Future[bytes]] = {}
        self._lock = threading.Lock()

    def ahead(self, digest: str, size: int) -> Future[bytes] | None:
        """The segment's bytes on their way (``None``: it is read as a stream, when it is needed)."""
        if self._pool is None or size > PREFETCH_MAX:
            return None
        with self._lock:
            if digest not in self._fetched:
                key = object_key(digest)
                self._fetched[digest] = self._pool.submit(self._store.read_bytes, self._scope, key, size + 1)
            return self._fetched[digest]

    def close(self) -> None:
        if self._pool is not None:
            for future in self._fetched.values():
                future.cancel()
            self._pool.shutdown(wait=True)


class Chain:
    """The objects of a segmented artifact read as one stream, in order; each is checked against its
    own digest and size as its last byte goes by (:class:`PartCorrupt`), so a damaged segment is
    found even where the whole still hashes as listed (it never does, short of a collision). Small
    segments (one turn each, after the chain's first) come from :class:`Prefetch`: a chain of many
    small objects costs about one round trip per batch, not per object."""

    def __init__(
        self,
        store: CheckpointStore,
        scope: StoreScope,
        parts: tuple[tuple[str, int], ...],
        prefetch: Prefetch,
    ) -> None:
        self._store, self._scope, self._parts, self._prefetch = store, scope, list(parts), prefetch
        self._stack = contextlib.ExitStack()
        self._src: HashingReader | None = None
        self._part: tuple[str, int] | None = None
        self._index = 0

    def __enter__(self) -> Chain:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _next(self) -> bool:
        self._end_part()
        if self._index >= len(self._parts):
            return False
        for digest, size in self._parts[self._index : self._index + PREFETCH_AHEAD]:
            self._prefetch.ahead(digest, size)
        self._part = self._parts[self._index]
        self._index += 1
        future = self._prefetch.ahead(*self._part)
        if future is not None:
            try:
                src: BinaryIO = io.BytesIO(future.result())
            except ValueError as e:  # larger than the record says
                raise PartCorrupt() from e
        else:
            src = self._stack.enter_context(self._store.open_read(self._scope, object_key(self._part[0])))
        self._src = HashingReader(src, None, self._part[1] + 1)
        return True

    def _end_part(self) -> None:
        if self._src is None or self._part is None:
            return
        digest, size = self._part
        if "sha256:" + self._src.sha.hexdigest() != digest or self._src.count != size:
            raise PartCorrupt()
        self._stack.close()
        self._stack = contextlib.ExitStack()
        self._src = self._part = None

    def read(self, n: int = -1) -> bytes:
        while True:
            if self._src is None and not self._next():
                return b""
            assert self._src is not None
            data = self._src.read(n)
            if data:
                return data
            self._end_part()
