"""Per-swarm reads and controls: status with handoff cards, pause/unpause, a seat's checkpoints, events.

Reads are open to the operator and the swarm's registered masters; pause and
unpause to the operator only. ``events?follow=true`` streams Server-Sent
Events (one ``data:`` line of JSON per event) until the client disconnects.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from agentihooks_checkpoint.scope import StoreScope
from aiohttp import web

from ...recovery.identity import SwarmId
from ..access.auth import is_operator, master_agent
from ..common import answer, blocking, named_swarm, operator_only, operator_or_master, state_of, token_digest
from ..errors import bad_request, forbidden, unknown_seat
from ..registry import SwarmEntry
from ..schemas import PauseAnswer, SwarmList, SwarmRef
from ..state import ApiState


async def swarms(request: web.Request) -> web.Response:
    """The swarms the caller may read: all served ones for the operator, its own for a master."""
    state = state_of(request)
    digest = token_digest(request)
    entries = state.registry.entries()
    if not is_operator(digest, state.operator_hash):
        entries = [e for e in entries if master_agent(digest, e.masters) is not None]
        if not entries:
            raise forbidden()
    listed = [
        SwarmRef(swarm=e.name, namespace=e.namespace, seats=[s.name for s in e.spec.seats]) for e in entries
    ]
    return answer(SwarmList(swarms=listed))


def _status(state: ApiState, entry: SwarmEntry) -> dict[str, Any]:
    cards = entry.recovery.cards(entry.spec)
    seats = []
    for seat in entry.spec.seats:
        current = state.current_of(entry, seat.name)
        seats.append(
            {
                "seat": seat.name,
                "execution_id": current.execution_id if current else None,
                "generation": current.generation if current else None,
                "task_id": seat.task.id,
            }
        )
    return {
        "swarm": entry.name,
        "namespace": entry.namespace,
        "paused": entry.recovery.paused(),
        "lease_held": state.lease_held(entry),
        "compatibility_key": entry.spec.compatibility_key,
        "seats": seats,
        "handoffs": [c.model_dump(mode="json") for c in cards],
    }


async def status(request: web.Request) -> web.Response:
    state = state_of(request)
    entry = state.entry(*named_swarm(request))
    operator_or_master(request, entry)
    return answer(await blocking(_status, state, entry))


async def _switch(request: web.Request, paused: bool) -> web.Response:
    operator_only(request)
    entry = state_of(request).entry(*named_swarm(request))
    await blocking(entry.recovery.pause if paused else entry.recovery.unpause)
    return answer(PauseAnswer(swarm=entry.name, paused=await blocking(entry.recovery.paused)))


async def pause(request: web.Request) -> web.Response:
    return await _switch(request, True)


async def unpause(request: web.Request) -> web.Response:
    return await _switch(request, False)


def _checkpoints(state: ApiState, entry: SwarmEntry, seat: str) -> dict[str, Any]:
    spec_seat = next((s for s in entry.spec.seats if s.name == seat), None)
    if spec_seat is None:
        raise unknown_seat()
    current = state.current_of(entry, seat)
    generation = current.task_generation if current else 1
    task_id = current.task_id if current else spec_seat.task.id
    namespace = current.store_namespace if current else entry.recovery.keys.namespace
    scope = StoreScope(swarm=entry.name, task_id=task_id, task_generation=generation, namespace=namespace)
    listed = state.catalog.list_checkpoints(scope)
    key = entry.spec.compatibility_key
    # the newest one that also verified by hash (what a resume would be offered), never by size alone
    candidates = sorted(
        (s for s in listed if s.complete and s.compatibility_key == key),
        key=lambda s: (s.checkpoint_sequence, s.created_at),
        reverse=True,
    )
    best = next((s for s in candidates if entry.recovery.checkpoint_verified(scope, s)), None)
    rows = [
        {**s.model_dump(mode="json"), "compatible": s.complete and s.compatibility_key == key} for s in listed
    ]
    return {
        "swarm": entry.name,
        "seat": seat,
        "task_id": task_id,
        "task_generation": generation,
        "compatibility_key": key,
        "newest_compatible": best.checkpoint_id if best else None,
        "checkpoints": rows,
    }


async def checkpoints(request: web.Request) -> web.Response:
    state = state_of(request)
    entry = state.entry(*named_swarm(request))
    operator_or_master(request, entry)
    return answer(await blocking(_checkpoints, state, entry, request.match_info["seat"]))


def _int(value: str | None, default: int, name: str, lo: int, hi: int) -> int:
    if value is None:
        return default
    try:
        n = int(value)
    except ValueError as e:
        raise bad_request(f"{name} must be an integer") from e
    if not lo <= n <= hi:
        raise bad_request(f"{name} must be between {lo} and {hi}")
    return n


#: A Redis stream entry id, as the events' ``id:`` lines carry it.
_EVENT_ID = re.compile(r"^[0-9]{1,20}-[0-9]{1,20}$")


def _after(events: list[Any], last: str | None) -> list[Any]:
    if last is None:
        return events
    ids = [e.id for e in events]
    return events[ids.index(last) + 1 :] if last in ids else [e for e in events if _newer(e.id, last)]


def _newer(a: str, b: str) -> bool:
    def parts(s: str) -> tuple[int, int]:
        x, _, y = s.partition("-")
        return (int(x), int(y or 0)) if x.isdigit() and (y or "0").isdigit() else (0, 0)

    return parts(a) > parts(b)


async def events(request: web.Request) -> web.StreamResponse:
    state = state_of(request)
    entry = state.entry(*named_swarm(request))
    caller = operator_or_master(request, entry)
    q = request.query
    count = _int(q.get("count"), 100, "count", 1, 1000)
    follow = q.get("follow") == "true"  # checked against the document first: true or false
    if not follow:
        got = await blocking(entry.recovery.events, count)
        return answer({"swarm": entry.name, "events": [e.model_dump(mode="json") for e in got]})
    resume = request.headers.get("Last-Event-ID")  # a client reconnecting after the stream broke
    if resume is not None and not _EVENT_ID.fullmatch(resume):
        raise bad_request("Last-Event-ID is not an event id of this stream")
    digest = token_digest(request)
    with state.quotas.hold("streams", digest):  # 429 at once past this credential's share
        got = await blocking(entry.recovery.events, count if resume is None else 1000)
        return await _stream(request, state, entry.id, got, kind=caller.kind, digest=digest, last=resume)


def _still_valid(state: ApiState, swarm: SwarmId, kind: str, digest: str) -> bool:
    """Whether the credential that opened a stream still grants it (a rotated or revoked master's
    credential, or a swarm no longer served, ends the stream)."""
    if kind == "operator":
        return is_operator(digest, state.operator_hash)
    entry = state.registry.get(swarm.name, swarm.namespace)
    return entry is not None and master_agent(digest, entry.masters) is not None


async def _stream(
    request: web.Request,
    state: ApiState,
    swarm: SwarmId,
    got: list[Any],
    *,
    kind: str,
    digest: str,
    last: str | None = None,
) -> web.StreamResponse:
    """Events after ``last`` (the reconnecting client's ``Last-Event-ID``), then each new one."""
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await resp.prepare(request)
    batch = got
    while True:
        for event in _after(batch, last):
            line = json.dumps(event.model_dump(mode="json"))
            await resp.write(f"id: {event.id}\nevent: {event.type}\ndata: {line}\n\n".encode())
            last = event.id
        if last is None:
            await resp.write(b": waiting\n\n")
        await asyncio.sleep(state.events_poll_seconds)
        if not _still_valid(state, swarm, kind, digest):
            await resp.write(b'event: end\ndata: {"reason": "credential_revoked"}\n\n')
            return resp
        entry = state.registry.get(swarm.name, swarm.namespace)
        if entry is None:
            return resp
        batch = await blocking(entry.recovery.events, 1000)
