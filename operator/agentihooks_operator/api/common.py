"""Helpers every route module uses: the shared state, JSON bodies, blocking calls, caller checks."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from ..recovery.models import EXECUTION_RE
from .auth import Caller, is_operator, master_agent, require_token, sha256_hex
from .errors import HttpProblem, bad_request, forbidden, not_published
from .registry import SwarmEntry
from .state import ApiState

STATE: web.AppKey[ApiState] = web.AppKey("state", ApiState)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
JSON_CAP = 64 * 1024
M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


def state_of(request: web.Request) -> ApiState:
    return request.app[STATE]


async def blocking(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking Redis or store call off kopf's event loop."""
    return await asyncio.to_thread(fn, *args, **kwargs)


def answer(data: BaseModel | dict[str, Any] | list[Any], status: int = 200) -> web.Response:
    body = data.model_dump(mode="json") if isinstance(data, BaseModel) else data
    return web.json_response(body, status=status)


async def body_model(request: web.Request, model: type[M]) -> M:
    """Parse the JSON body as ``model``; 400 naming every wrong field, 413 when too large."""
    if request.content_length is not None and request.content_length > JSON_CAP:
        raise HttpProblem(413, "body_too_large", f"the JSON body may be at most {JSON_CAP} bytes")
    raw = await request.content.read(JSON_CAP + 1)
    if len(raw) > JSON_CAP:
        raise HttpProblem(413, "body_too_large", f"the JSON body may be at most {JSON_CAP} bytes")
    try:
        data = json.loads(raw or b"null")
    except (ValueError, UnicodeDecodeError) as e:
        raise bad_request("the body is not valid JSON", "invalid_json") from e
    try:
        return model.model_validate(data)
    except ValidationError as e:
        parts = [f"{'.'.join(map(str, err['loc'])) or 'body'}: {err['msg']}" for err in e.errors()]
        raise bad_request("invalid body: " + "; ".join(parts), "invalid_body") from e


def token_digest(request: web.Request) -> str:
    """sha256 hex of the bearer token (401 when missing or malformed); the token itself is dropped."""
    return sha256_hex(require_token(request.headers.get("Authorization")))


def operator_only(request: web.Request) -> Caller:
    if not is_operator(token_digest(request), state_of(request).operator_hash):
        raise forbidden()
    return Caller("operator")


def operator_or_master(request: web.Request, entry: SwarmEntry) -> Caller:
    """The operator, or a registered master of ``entry``'s swarm (bound to its agent)."""
    digest = token_digest(request)
    if is_operator(digest, state_of(request).operator_hash):
        return Caller("operator")
    agent = master_agent(digest, entry.masters)
    if agent is None:
        raise forbidden()
    return Caller("master", agent=agent)


def valid_execution(execution_id: str) -> bool:
    return bool(EXECUTION_RE.fullmatch(execution_id))


async def worker_of(request: web.Request, execution_id: str) -> tuple[SwarmEntry, Any]:
    """The swarm entry and attempt record of a worker calling with its own live credential, else 403."""
    state = state_of(request)
    token = require_token(request.headers.get("Authorization"))
    if not valid_execution(execution_id):
        raise forbidden()
    found = await blocking(state.find_execution, execution_id)
    if found is None:
        if await blocking(state.unpublished_worker, execution_id, token):
            raise not_published()
        raise forbidden()
    entry, record = found
    if not await blocking(entry.recovery.check_worker_credential, execution_id, token):
        raise forbidden()
    return entry, record
