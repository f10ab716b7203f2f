"""Scoped checkpoint routes for workers launched with ``checkpoint_remote: true``.

A worker reads only the checkpoint its directive names (its pointer, its
manifest and the objects that manifest lists) and writes only under its own
task and generation scope: objects whose bytes hash to their key, manifests of
its own execution, write-once commit pointers that match a manifest it wrote.
Bodies stream through a size cap; anything refused leaves the store untouched.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from agentihooks_checkpoint.checks import check_content, check_scope
from agentihooks_checkpoint.errors import CheckpointExists, ObjectMissing, RecordRefused, StoreError
from agentihooks_checkpoint.layout import manifest_key
from agentihooks_checkpoint.record import RECORD_SIZE_CAP, parse_record
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores.base import POINTER_SIZE_CAP, CheckpointStore
from aiohttp import web

from ...recovery.store.records import AttemptRecord
from ..common import (
    BODY_TIMEOUT,
    WORKER_FOUND,
    answer,
    blocking,
    body_timeout,
    state_of,
    token_digest,
    too_slow,
    worker_of,
)
from ..errors import HttpProblem, bad_request, forbidden, not_found
from ..registry import SwarmEntry
from ..schemas import KeysAnswer, SizeAnswer, WrittenAnswer
from .store_rules import Named, StoreKey, check_scope_params, named_checkpoint, own_scope, parse_key, readable

CHUNK = 256 * 1024
_HEX = re.compile(r"^[0-9a-f]{64}$")


def _store(request: web.Request) -> CheckpointStore:
    store = state_of(request).store
    if store is None:
        raise HttpProblem(503, "no_store", "no checkpoint store is configured on the controller")
    return store


async def _granted(request: web.Request) -> tuple[CheckpointStore, StoreScope, AttemptRecord]:
    execution = request.match_info["execution"]
    entry, record = await worker_of(request, execution)
    scope = own_scope(entry.name, record)
    q = request.query
    check_scope_params(scope, q.get("swarm"), q.get("task_id"), q.get("task_generation"), q.get("namespace"))
    return _store(request), scope, record


def _named(store: CheckpointStore, scope: StoreScope, checkpoint_id: str | None) -> Named:
    """The named checkpoint's manifest key and listed digests, as far as they can be read."""
    if checkpoint_id is None:
        return Named(None)
    try:
        key, _ = store.read_pointer(scope, checkpoint_id)
    except (ObjectMissing, StoreError, ValueError):
        return Named(checkpoint_id)
    try:
        record = parse_record(store.read_bytes(scope, key, RECORD_SIZE_CAP))
        digests = frozenset(d for item in check_content(record) for d, _ in item.objects)
    except (ObjectMissing, StoreError, ValueError, RecordRefused):
        digests = frozenset()
    return Named(checkpoint_id, key, digests)


def uploads_key(request: web.Request, scope: StoreScope, execution_id: str) -> str:
    """The Redis set of object digests this execution uploaded (it may read them back to verify)."""
    found = request.get(WORKER_FOUND)
    if found is None:  # authentication found the worker's swarm; a route without it has no uploads
        raise HttpProblem(503, "swarm_not_published", "the worker's swarm is not served here yet")
    entry: SwarmEntry = found[0]
    return entry.recovery.keys.api_uploads(execution_id)


async def _may_read(
    request: web.Request, store: CheckpointStore, scope: StoreScope, record: AttemptRecord, key: StoreKey
) -> bool:
    named = await blocking(_named, store, scope, named_checkpoint(record.directive))
    if readable(key, named):
        return True
    if key.kind != "object":
        return False
    redis = state_of(request).redis
    return bool(await blocking(redis.sismember, uploads_key(request, scope, record.execution_id), key.name))


async def _readable(request: web.Request) -> tuple[CheckpointStore, StoreScope, StoreKey]:
    store, scope, record = await _granted(request)
    key = parse_key(request.query.get("key", ""))
    if not await _may_read(request, store, scope, record, key):
        raise forbidden()
    return store, scope, key


async def read_object(request: web.Request) -> web.StreamResponse:
    store, scope, key = await _readable(request)
    size = await blocking(store.size_of, scope, key.key)
    if size is None:
        raise not_found("no such object", "missing_object")
    try:
        cm = store.open_read(scope, key.key)
        src = await blocking(cm.__enter__)
    except ObjectMissing as e:
        raise not_found("no such object", "missing_object") from e
    try:
        resp = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        await resp.prepare(request)
        while chunk := await blocking(src.read, CHUNK):
            await resp.write(chunk)
        await resp.write_eof()
        return resp
    finally:
        await blocking(cm.__exit__, None, None, None)


def _own_size(store: CheckpointStore, scope: StoreScope, record: AttemptRecord, key: StoreKey) -> int | None:
    """Size of a pointer or manifest the worker may be writing: absent, or its own execution's."""
    if key.kind == "object":
        raise forbidden()
    size = store.size_of(scope, key.key)
    if size is None:
        return None
    try:
        mkey = store.read_pointer(scope, key.name)[0] if key.kind == "pointer" else key.key
        owner = parse_record(store.read_bytes(scope, mkey, RECORD_SIZE_CAP)).authority.execution_id
    except (ObjectMissing, StoreError, ValueError, RecordRefused) as e:
        raise forbidden() from e
    if owner != record.execution_id:
        raise forbidden()
    return size


async def object_size(request: web.Request) -> web.Response:
    store, scope, record = await _granted(request)
    key = parse_key(request.query.get("key", ""))
    if await _may_read(request, store, scope, record, key):
        return answer(SizeAnswer(size=await blocking(store.size_of, scope, key.key)))
    return answer(SizeAnswer(size=await blocking(_own_size, store, scope, record, key)))


async def list_keys(request: web.Request) -> web.Response:
    store, scope, record = await _granted(request)
    under = request.query.get("under", "")
    named = await blocking(_named, store, scope, named_checkpoint(record.directive))
    present = [k for k in named.readable_keys() if k.startswith(under)]
    keys = [k for k in present if await blocking(store.size_of, scope, k) is not None]
    return answer(KeysAnswer(keys=sorted(keys)))


UPLOADS_TTL_SECONDS = 7 * 24 * 3600


def _remember(client: Any, key: str, digest: str) -> None:
    pipe = client.pipeline(transaction=False)
    pipe.sadd(key, digest)
    pipe.expire(key, UPLOADS_TTL_SECONDS)
    pipe.execute()


def _too_large(cap: int) -> HttpProblem:
    return HttpProblem(413, "too_large", f"this upload may be at most {cap} bytes")


async def _next_chunk(request: web.Request) -> bytes:
    """The next piece of an upload (empty at its end); 408 when none comes within the body timeout."""
    try:
        async with asyncio.timeout(request.app[BODY_TIMEOUT]):
            return await request.content.read(CHUNK)
    except TimeoutError as e:
        raise body_timeout(request) from e


async def _spool(request: web.Request, cap: int, owner: tuple[str, str]) -> tuple[Path, str, int]:
    """Stream the body into a private temp file, hashing it; 413 past ``cap`` (the file is removed).
    ``owner`` (credential digest, swarm) is charged for the spool. An upload must keep up the state's
    ``upload_min_rate`` bytes per second over every window of ``upload_grace`` seconds (the first one
    included), or it is cut (408) and its spool given back: measured per window, not averaged since the
    start, so a body sent fast and then trickled a byte at a time cannot hold its share for long."""
    if request.content_length is not None and request.content_length > cap:
        raise _too_large(cap)
    state = state_of(request)
    quotas = state.quotas
    fd, name = tempfile.mkstemp(prefix="agentihooks-upload-", dir=state.spool_dir)
    path = Path(name)
    sha = hashlib.sha256()
    size = 0
    loop = asyncio.get_running_loop()
    window, in_window = loop.time(), 0
    try:
        with os.fdopen(fd, "wb") as out:
            while chunk := await _next_chunk(request):
                if size + len(chunk) > cap:
                    raise _too_large(cap)
                quotas.spool(len(chunk), *owner)  # 429 past its shares, 507 when the spool is full
                size += len(chunk)
                in_window += len(chunk)
                sha.update(chunk)
                await blocking(out.write, chunk)
                elapsed = loop.time() - window
                if elapsed >= state.upload_grace:  # a window ended: did it keep up the floor rate?
                    if in_window < state.upload_min_rate * elapsed:
                        raise too_slow(request)
                    window, in_window = loop.time(), 0
    except BaseException:
        os.unlink(path)
        quotas.unspool(size, *owner)
        raise
    return path, sha.hexdigest(), size


def _own_record(data: bytes, scope: StoreScope, record: AttemptRecord, checkpoint_id: str) -> None:
    try:
        parsed = parse_record(data)
    except RecordRefused as e:
        raise bad_request(
            f"the manifest is not a valid checkpoint record ({e.reason})", "invalid_record"
        ) from e
    if parsed.checkpoint_id != checkpoint_id:
        raise bad_request("the manifest names another checkpoint id", "invalid_record")
    try:
        check_scope(parsed, scope)
    except RecordRefused as e:
        raise forbidden() from e
    if parsed.authority.execution_id != record.execution_id:
        raise forbidden()


def _write_manifest(
    store: CheckpointStore, scope: StoreScope, record: AttemptRecord, key: StoreKey, data: bytes
) -> None:
    if hashlib.sha256(data).hexdigest() != key.digest:
        raise bad_request("the manifest's bytes do not hash to its key", "digest_mismatch")
    _own_record(data, scope, record, key.name)
    store.write_bytes(scope, key.key, data)


def _write_pointer(
    store: CheckpointStore, scope: StoreScope, record: AttemptRecord, key: StoreKey, data: bytes
) -> None:
    try:
        obj: Any = json.loads(data)
    except ValueError as e:
        raise bad_request("the commit pointer is not JSON", "invalid_pointer") from e
    digest = obj.get("sha256") if isinstance(obj, dict) else None
    if not isinstance(digest, str) or not _HEX.fullmatch(digest):
        raise bad_request("the commit pointer carries no sha256", "invalid_pointer")
    mkey = manifest_key(key.name, digest)
    if set(obj) != {"manifest", "sha256"} or obj["manifest"] != mkey:
        raise bad_request("the commit pointer must name this checkpoint's manifest", "invalid_pointer")
    try:
        manifest = store.read_bytes(scope, mkey, RECORD_SIZE_CAP)
    except ObjectMissing as e:
        raise bad_request("the manifest of this checkpoint was not written", "invalid_pointer") from e
    if hashlib.sha256(manifest).hexdigest() != obj["sha256"]:
        raise bad_request("the commit pointer's sha256 does not match the manifest", "invalid_pointer")
    _own_record(manifest, scope, record, key.name)
    try:
        store.write_once(scope, key.key, data)
    except CheckpointExists as e:
        raise HttpProblem(409, "already_committed", "this checkpoint is already committed") from e


async def write_object(request: web.Request) -> web.Response:
    store, scope, record = await _granted(request)
    key = parse_key(request.query.get("key", ""))
    once = request.query.get("mode", "replace") == "once"
    if (key.kind == "pointer") != once:
        raise bad_request("commit pointers are written once (mode=once); nothing else is", "invalid_mode")
    cap = {"object": state_of(request).object_cap, "manifest": RECORD_SIZE_CAP, "pointer": POINTER_SIZE_CAP}
    quotas = state_of(request).quotas
    owner = (token_digest(request), f"{scope.namespace or ''}/{scope.swarm}")
    with quotas.hold("uploads", owner[0]):  # 429 at once past this credential's share
        path, hexdigest, size = await _spool(request, cap[key.kind], owner)
        try:
            await _keep(request, store, scope, record, key=key, path=path, hexdigest=hexdigest)
        finally:
            path.unlink(missing_ok=True)
            quotas.unspool(size, *owner)
    return answer(WrittenAnswer(key=key.key, size=size), 201)


async def _keep(
    request: web.Request,
    store: CheckpointStore,
    scope: StoreScope,
    record: AttemptRecord,
    *,
    key: StoreKey,
    path: Path,
    hexdigest: str,
) -> None:
    if key.kind == "object":
        if hexdigest != key.name:
            raise bad_request("the uploaded bytes do not hash to the object's key", "digest_mismatch")
        await blocking(store.write_file, scope, key.key, path)
        await blocking(
            _remember, state_of(request).redis, uploads_key(request, scope, record.execution_id), key.name
        )
    else:
        data = await blocking(path.read_bytes)
        writer = _write_manifest if key.kind == "manifest" else _write_pointer
        await blocking(writer, store, scope, record, key, data)
