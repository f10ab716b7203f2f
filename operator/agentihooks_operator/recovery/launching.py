"""Admitting attempts and launching them under the journal.

An admission (a Lua script) writes the attempt record, makes it the seat's
current attempt, issues its launch grant, account slot and worker credential
hash, and marks its ``launch`` step ``unknown``, all at once. The launch itself
(creating a Pod) cannot be atomic with Redis, so:

* straight after the admission, this process knows it has not sent it yet and
  sends it;
* a launch the launcher cannot send yet (:class:`~.errors.LaunchBlocked`: a missing credential
  Secret, a Pod the API server refuses) stays ``unknown`` with the reason in its journal entry, which
  the seat's card shows;
* a later pass that finds ``launch`` still ``unknown`` first asks the launcher
  whether the Pod exists; only if it does not, it mints a new credential and
  sends the launch again. Either way it then marks the step ``ok``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets

from pydantic import SecretStr

from .context import Ctx
from .errors import LaunchBlocked
from .models import LaunchPlan
from .records import AttemptRecord

log = logging.getLogger("agentihooks.recovery")


def mint() -> tuple[str, str]:
    """A new worker credential and the sha256 hex that is stored in its place."""
    token = secrets.token_urlsafe(32)
    return token, hashlib.sha256(token.encode()).hexdigest()


def plan_for(record: AttemptRecord, token: str, epoch: int) -> LaunchPlan:
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
    )


def launch_step(ctx: Ctx, record: AttemptRecord, token: str | None) -> LaunchPlan | None:
    """Finish the ``launch`` step of ``record``; ``token`` is set only right after the admission.

    Returns the plan that was sent, or ``None`` when the Pod was observed to exist already.
    """
    eid = record.execution_id
    with ctx.lock_for(eid):
        return _launch_locked(ctx, record, token)


def _launch_locked(ctx: Ctx, record: AttemptRecord, token: str | None) -> LaunchPlan | None:
    eid = record.execution_id
    if token is None:
        # Resumed: the step is unknown, unless another thread of this process just finished it.
        ctx.w.trip()
        raw = ctx.w.client.hget(ctx.w.keys.attempt_journal, eid)
        if raw is not None and json.loads(raw).get("launch", {}).get("status") in ("ok", "skipped"):
            return None
        # Observe before sending again.
        if ctx.launcher.exists(eid):
            ctx.w.run("marks", {"marks": [[eid, "launch", "ok"]], "finish": [eid]})
            return None
        token, digest = mint()
        answer = ctx.w.run("credential", {"execution_id": eid, "cred_hash": digest})
        if not answer["ok"]:
            # No longer the seat's current attempt: never launch it.
            ctx.w.run("marks", {"marks": [[eid, "launch", "skipped"]], "finish": [eid]})
            return None
    plan = plan_for(record, token, ctx.w.epoch)
    ctx.point("before:launch")
    try:
        ctx.launcher.launch(plan)
    except LaunchBlocked as e:
        # Stays ``unknown`` (a later pass observes, then sends again); the journal says why.
        answer = ctx.w.run(
            "blocked",
            {
                "execution_id": eid,
                "seat": record.seat,
                "generation": record.generation,
                "reason": e.reason,
                "detail": e.message,
            },
        )
        if answer.get("changed"):
            log.warning("recovery of swarm %s: launch of %s blocked: %s", ctx.swarm, eid, e.message)
        return None
    ctx.point("after:launch")
    ctx.w.run("marks", {"marks": [[eid, "launch", "ok"]], "finish": [eid]})
    return plan
