"""One recovery pass over a swarm's observed attempts.

Reads are batched: one pipeline for the swarm's small hashes (seats, open
work, pause switch, recorded requests) and one for the records of the attempts
that need work. A healthy pass therefore costs a constant number of round
trips whatever the swarm's size; each failed attempt then costs a handful of
scripts (fence, two releases, decision, launch confirmation).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ..swarm import SwarmSpec
from . import choices
from .context import Ctx
from .errors import InjectedFault, LeaseLost
from .fencing import Failure, recover
from .launching import launch_step
from .models import AttemptObservation, PassReport
from .reads import attempts, snapshot

log = logging.getLogger("agentihooks.recovery")


def run_pass(
    ctx: Ctx, spec: SwarmSpec, observations: Sequence[AttemptObservation], report: PassReport
) -> None:
    snap = snapshot(ctx.w)
    report.paused = snap.paused
    failures: dict[str, Failure] = {}
    for o in observations:
        if o.state not in ("failed", "gone") or snap.work.get(o.execution_id) == "launch":
            continue
        if snap.seats.get(o.seat) != o.execution_id:
            continue  # not the seat's current attempt (an old, already fenced Pod)
        reason = o.reason or ("application_exit" if o.state == "failed" else "node_lost")
        failures[o.execution_id] = Failure(o.execution_id, o.seat, o.generation, reason, o.superseded_legacy)
    ids = list(dict.fromkeys([*failures, *snap.work]))
    task_of = {s.name: s.task.id for s in spec.seats}
    tasks = [task_of[f.seat] for f in failures.values() if f.seat in task_of]
    found, rows = attempts(ctx.w, ids, tasks)
    for eid in ids:
        att = found[eid]
        try:
            if snap.work.get(eid) == "launch":
                if att.record is not None and launch_step(ctx, att.record, None) is not None:
                    report.launches.append(eid)
                continue
            failure = failures.get(eid)
            seat = failure.seat if failure else (att.record.seat if att.record else "")
            row = rows.get(task_of.get(seat, ""))
            recover(ctx, spec, att, failure, paused=snap.paused, row=row, report=report)
        except (InjectedFault, LeaseLost):
            raise
        except Exception:
            log.exception("recovery of swarm %s: step of %s failed; retried next pass", ctx.swarm, eid)
    choices.apply_requests(ctx, spec, snap, report)
