"""Held recoveries: the Python side of the ``held-recoveries`` records (scripts in :mod:`.store.held_lua`).

A recovery is held at a step whose outcome is unknown and cannot be observed
by the controller. The record names the call id, the attempt, the step, when
it was held, when it expires (30 minutes after it was held or last resumed)
and the SHA-256 hex of the current resume token. A held record starts with no
token at all: the operator asks for one (:func:`issue`), and every resume that
does not finish hands out a new one. The token itself is returned once and
never stored, logged or put in an event.
"""

from __future__ import annotations

import hashlib
import json
import secrets

from .context import Ctx
from .models import HeldStep
from .store.records import FenceRecord, HeldRecovery

#: A held recovery expires this long after it was held or last resumed.
TTL_MS = 30 * 60 * 1000
#: At most this many held recoveries per swarm; opening one more drops the oldest.
MAX_HELD = 20
ACCEPTS = ["applied", "not_applied"]


def new_call() -> str:
    return f"rc-{secrets.token_hex(8)}"


def new_token() -> tuple[str, str]:
    """A resume token (24 random bytes, URL-safe) and the SHA-256 hex stored in its place."""
    token = secrets.token_urlsafe(24)
    return token, token_hash(token)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def plan_of(fence: FenceRecord, step: str, broker_url: str | None) -> str:
    """What a held recovery will do when resumed; a resume whose plan differs is refused."""
    plan = {
        "execution_id": fence.execution_id,
        "generation": fence.generation,
        "seat": fence.seat,
        "step": step,
        "account_slots": broker_url or "built-in",
    }
    return hashlib.sha256(json.dumps(plan, sort_keys=True).encode()).hexdigest()


def _records(ctx: Ctx) -> list[HeldRecovery]:
    ctx.w.trip()
    raw = ctx.w.client.hgetall(ctx.w.keys.held_recoveries)
    now = ctx.now_ms()
    found = [HeldRecovery.model_validate_json(v) for v in raw.values()]
    return sorted((r for r in found if r.expires_at_ms > now), key=lambda r: r.seq)


def live(ctx: Ctx) -> list[HeldRecovery]:
    """Every held recovery of the swarm that has not expired, oldest first."""
    return _records(ctx)


def get(ctx: Ctx, call: str) -> HeldRecovery | None:
    ctx.w.trip()
    raw = ctx.w.client.hget(ctx.w.keys.held_recoveries, call)
    if raw is None:
        return None
    rec = HeldRecovery.model_validate_json(raw)
    return rec if rec.expires_at_ms > ctx.now_ms() else None


def for_execution(ctx: Ctx, execution_id: str) -> HeldRecovery | None:
    return next((r for r in _records(ctx) if r.execution_id == execution_id), None)


def view(rec: HeldRecovery) -> HeldStep:
    return HeldStep(
        call=rec.call,
        execution_id=rec.execution_id,
        seat=rec.seat,
        step=rec.step,
        since_ms=rec.since_ms,
        expires_at_ms=rec.expires_at_ms,
        accepts=list(ACCEPTS),
    )


def open_hold(ctx: Ctx, fence: FenceRecord, step: str, plan: str, *, reopen: bool, detail: str) -> str | None:
    """Hold ``step`` of the fenced attempt under a new call id (``None``: not opened).

    ``reopen`` (a step already held whose record expired or was dropped) opens
    a new record only while fewer than :data:`MAX_HELD` exist, so held steps
    never push each other out in turn.
    """
    call = new_call()
    ctx.point("before:hold")
    answer = ctx.w.run(
        "hold_open",
        {
            "execution_id": fence.execution_id,
            "step": step,
            "call": call,
            "plan": plan,
            "ttl_ms": TTL_MS,
            "max": MAX_HELD,
            "reopen": reopen,
            "detail": detail,
            "marks": [[fence.execution_id, step, "held"]],
        },
    )
    ctx.point("after:hold")
    return call if answer["ok"] else None


def claim(ctx: Ctx, call: str, digest: str) -> str:
    """Take the held recovery for one resume: ``ok``, ``not_found`` (gone or taken) or ``token``."""
    ctx.point("before:resume_claim")
    answer = ctx.w.run("hold_claim", {"call": call, "token_hash": digest, "ttl_ms": TTL_MS})
    ctx.point("after:resume_claim")
    return "ok" if answer["ok"] else str(answer["refused"])


def hold_again(ctx: Ctx, rec: HeldRecovery, *, held: bool, detail: str) -> str | None:
    """Keep a claimed recovery under the same call with a new token (returned once).

    ``held``: the step is held again (journal, fence and a ``held`` event say so);
    otherwise it keeps its journal status (``failed``) and only the record stays.
    """
    token, digest = new_token()
    payload = {"call": rec.call, "token_hash": digest, "ttl_ms": TTL_MS, "held": held, "detail": detail}
    if held:
        payload["marks"] = [[rec.execution_id, rec.step, "held"]]
    ctx.point("before:hold_again")
    answer = ctx.w.run("hold_again", payload)
    ctx.point("after:hold_again")
    return token if answer["ok"] else None


def issue(ctx: Ctx, call: str) -> tuple[HeldRecovery, str] | None:
    """A new resume token for a held recovery; any earlier token stops working."""
    token, digest = new_token()
    answer = ctx.w.run("hold_token", {"call": call, "token_hash": digest, "ttl_ms": TTL_MS})
    if not answer["ok"]:
        return None
    return HeldRecovery.model_validate_json(answer["record"]), token


def drop(ctx: Ctx, call: str) -> None:
    ctx.point("before:resume_drop")
    ctx.w.run("hold_drop", {"call": call})
    ctx.point("after:resume_drop")
