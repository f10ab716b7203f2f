"""Admitting attempts and launching them under the journal.

An admission (a Lua script) writes the attempt record, makes it the seat's
current attempt, issues its launch grant, account slot and worker credential
hash, and marks its ``launch`` step ``unknown``, all at once. The launch itself
(creating a Pod) cannot be atomic with Redis, so:

* straight after the admission, this process knows it has not sent it yet and
  sends it;
* a launch the launcher cannot send yet (:class:`~..errors.LaunchBlocked`: a missing credential
  Secret, a Pod the API server refuses) stays ``unknown`` with the reason in its journal entry, which
  the seat's card shows;
* a later pass that finds ``launch`` still ``unknown`` first asks the launcher
  whether the launch took effect, then for positive evidence that it took
  effect although its Pod is gone (:mod:`.launchseen`; the step is then done
  and the pass fences the attempt for its missing Pod); only if neither, it
  mints a new credential and sends the launch again, marked ``resumed`` (the
  launcher then writes the Secret before anything can read it). Either way
  it then marks the step ``ok``.

A write that may go out together with the launch (:class:`Alongside`: the
fenced attempt's retire) runs on a small pool while the launch is sent; its
journal marks are written by the launch's own ``ok`` marks, so it costs no
round trip and waits for nothing on the launch's path. A crash before those
marks leaves both steps ``unknown``: each is observed before being sent again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import secrets
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from pydantic import SecretStr

from ...logs import carry
from .. import workerlease
from ..context import Ctx
from ..errors import InjectedFault, LaunchBlocked, LeaseLost
from ..models import LaunchPlan
from ..store.records import AttemptRecord, FenceRecord
from .launchseen import seen, sent_and_gone

log = logging.getLogger("agentihooks.recovery")
#: Writes sent beside launches (the fenced Pods' deletions); bounded like the pass's pool.
_BESIDE = ThreadPoolExecutor(max_workers=16, thread_name_prefix="beside-launch")


@dataclass
class Alongside:
    """A write sent concurrently with a launch; ``marks``/``finish`` join the launch's ``ok`` script."""

    send: Callable[[], None]
    marks: list[list[str]]
    finish: list[str]
    #: Set once ``send`` returned; ``marked`` once its marks are written.
    sent: bool = False
    marked: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> Future[None]:
        return _BESIDE.submit(carry(self._run))

    def _run(self) -> None:
        with self._lock:
            if not self.sent:
                self.send()
                self.sent = True

    def finish_alone(self, ctx: Ctx) -> None:
        """Send it (if the launch did not) and write its marks on their own (a blocked or absent launch)."""
        self._run()
        if not self.marked:
            ctx.w.run("marks", {"marks": self.marks, "finish": self.finish})
            self.marked = True


def mint() -> tuple[str, str]:
    """A new worker credential and the sha256 hex that is stored in its place."""
    token = secrets.token_urlsafe(32)
    return token, hashlib.sha256(token.encode()).hexdigest()


def plan_for(record: AttemptRecord, token: str, epoch: int, *, resumed: bool = False) -> LaunchPlan:
    return LaunchPlan(
        execution_id=record.execution_id,
        seat=record.seat,
        generation=record.generation,
        task_id=record.task_id,
        task_generation=record.task_generation,
        task_text=record.task_text,
        directive=record.directive,
        restore_from=record.restore_from,
        grant_id=record.grant_id,
        worker_token=SecretStr(token),
        compatibility_key=record.compatibility_key,
        epoch=epoch,
        resumed=resumed,
        store_namespace=record.store_namespace,
        worker_lease_ms=record.worker_lease_ms,
    )


#: ``stops_by`` not given: read from the replaced attempt's fence.
UNREAD = -1


def launch_step(
    ctx: Ctx,
    record: AttemptRecord,
    token: str | None,
    alongside: Alongside | None = None,
    *,
    stops_by: int | None = UNREAD,
) -> LaunchPlan | None:
    """Finish the ``launch`` step of ``record``; ``token`` is set only right after the admission.

    Returns the plan that was sent, or ``None`` when the Pod was observed to exist already.
    ``alongside`` (only with a ``token``) is sent concurrently and marked with the launch.
    ``stops_by``: the replaced attempt's fence's ``old_attempt_stops_by_ms`` when the caller holds
    that fence (no read on the launch's path), else it is read.
    """
    eid = record.execution_id
    with ctx.lock_for(eid):
        return _launch_locked(ctx, record, token, alongside, stops_by)


def _launch_locked(
    ctx: Ctx, record: AttemptRecord, token: str | None, alongside: Alongside | None, stops_by: int | None
) -> LaunchPlan | None:
    eid = record.execution_id
    resumed = token is None
    if token is None:
        if ctx.waits.waiting(eid, ctx.spec_key):  # blocked lately: not before its backoff ran out
            return None
        # Resumed: the step is unknown, unless another thread of this process just finished it.
        ctx.w.trip()
        raw = ctx.w.client.hget(ctx.w.keys.attempt_journal, eid)
        entry = json.loads(raw).get("launch", {}) if raw is not None else {}
        if entry.get("status") in ("ok", "skipped"):
            ctx.waits.done(eid)
            return None
        # Observe before sending again.
        found = seen(ctx.launcher, eid)
        if found == "made" or sent_and_gone(ctx, eid, entry, found):
            ctx.w.run("marks", {"marks": [[eid, "launch", "ok"]], "finish": [eid]})
            ctx.waits.done(eid)
            return None
        if _wait_for_predecessor(ctx, record):
            return None
        token, digest = mint()
        answer = ctx.w.run("credential", {"execution_id": eid, "cred_hash": digest, "resend": True})
        if not answer["ok"]:
            # No longer the seat's current attempt: never launch it.
            ctx.w.run("marks", {"marks": [[eid, "launch", "skipped"]], "finish": [eid]})
            ctx.waits.done(eid)
            return None
    elif _wait_for_predecessor(ctx, record, stops_by):
        return None
    plan = plan_for(record, token, ctx.w.epoch, resumed=resumed)
    ctx.point("before:launch")
    beside = alongside.start() if alongside is not None else None
    try:
        ctx.launcher.launch(plan)
    except LaunchBlocked as e:
        if beside is not None:
            beside.result()
        note_blocked(ctx, record, e)
        return None
    try:
        ctx.point("after:launch")
    except InjectedFault:
        # A simulated crash: a dead process's in-flight write has landed or not by the time the next
        # controller looks, never still on its way (a test would see it land after that look).
        if beside is not None:
            with contextlib.suppress(Exception):
                beside.result()
        raise
    marks, finish = [[eid, "launch", "ok"]], [eid]
    failed: Exception | None = None
    if beside is not None and alongside is not None:
        try:
            beside.result()
        except (InjectedFault, LeaseLost):
            raise  # a crash: nothing more is written, both steps stay unknown
        except Exception as e:  # the launch is still marked; the concurrent write is retried later
            failed = e
        else:
            marks, finish = [*marks, *alongside.marks], [*finish, *alongside.finish]
    ctx.w.run("marks", {"marks": marks, "finish": finish})
    if failed is not None:
        raise failed
    if alongside is not None:
        alongside.marked = True
    ctx.waits.done(eid)
    return plan


def _wait_for_predecessor(ctx: Ctx, record: AttemptRecord, stops_by: int | None = UNREAD) -> bool:
    """Whether ``record`` replaces an attempt that may still run (its death not proven, its worker's
    lease not yet out): then its launch is noted blocked until that lease ends, and not sent."""
    if record.replaces is None:
        return False
    until = stops_by
    if until == UNREAD:
        raw = ctx.w.client.hget(ctx.w.keys.attempt_fences, record.replaces)
        ctx.w.trip()
        if raw is None:
            return False
        until = FenceRecord.model_validate_json(raw).old_attempt_stops_by_ms
    if until is None:  # a proven death, or no lease: no clock reading on the launch's path
        return False
    now = ctx.now_ms()
    if until <= now:
        return False
    blocked = LaunchBlocked(workerlease.wait_message(until), reason=workerlease.WAIT_REASON)
    note_blocked(ctx, record, blocked, wait=(until - now) / 1000)
    return True


def note_blocked(ctx: Ctx, record: AttemptRecord, e: LaunchBlocked, *, wait: float | None = None) -> None:
    """A refused launch: it stays ``unknown`` (a later pass observes, then sends it again once its
    backoff ran out, :mod:`.launchwait`, or the ``wait`` it was given); the journal says why and when
    it is tried next."""
    eid = record.execution_id
    if wait is not None:
        ctx.waits.hold(eid, ctx.spec_key, wait)
    else:
        wait = ctx.waits.blocked(eid, ctx.spec_key, grow=e.reason != "api_unavailable")
    answer = ctx.w.run(
        "blocked",
        {
            "execution_id": eid,
            "seat": record.seat,
            "generation": record.generation,
            "reason": e.reason,
            "detail": e.message,
            "retry_ms": int(wait * 1000),
        },
    )
    if answer.get("changed") and e.reason != workerlease.WAIT_REASON:  # the fence logged that wait
        log.warning(
            "recovery of swarm %s: launch of %s blocked: %s; tried again in %.1f s%s",
            ctx.label,
            eid,
            e.message,
            wait,
            "" if e.reason == "api_unavailable" else ", then less often",
        )
