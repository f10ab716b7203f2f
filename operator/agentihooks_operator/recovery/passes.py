"""One recovery pass over a swarm's observed attempts.

Reads are batched: one pipeline for the swarm's small hashes (seats, open
work, pause switch, recorded requests) and one for the records of the attempts
that need work. A healthy pass therefore costs a constant number of round
trips whatever the swarm's size.

Failed attempts are handled in two phases. First every newly failed attempt
is fenced, one Redis script each, in order: nothing of a failure waits behind
another failure's Kubernetes calls. Then each attempt's remaining steps
(releases, retire, decision, launch: sequential and journaled per attempt)
run on a bounded pool (:mod:`.fanout`), so the Kubernetes calls of different
attempts overlap. Each attempt reports into its own :class:`PassReport`; they
are merged in the pass's order so the report reads the same however the
threads interleaved.

:func:`run_one` is the same for a single attempt whose Pod event showed it
failed (the operator's event-driven path): one narrow read instead of the
swarm's snapshot, then the same fence and steps. Both paths claim an attempt in
the Recovery's :class:`~.fanout.InFlight` set first and leave alone one that is
claimed, so a pass and the event path never advance the same attempt at once
in one process (across processes the lease and the journal guard it).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence

from ..errors import OperatorError
from ..logs import about_attempt
from ..swarm import SwarmSpec
from .context import Ctx
from .errors import InjectedFault, LeaseLost
from .failures import failures_of, narrow
from .fanout import Fanout, InFlight
from .models import AttemptObservation, PassReport
from .relaunch import finish_retire
from .steps import choices
from .steps.fencing import Failure, fence_step, recover
from .steps.launching import launch_step
from .store.reads import Attempt, Snapshot, attempts, snapshot
from .store.records import LedgerRow

log = logging.getLogger("agentihooks.recovery")

#: The report lists an attempt's steps append to (merged back in the pass's order).
_LISTS = ("fenced", "decisions", "launches", "retired", "refusals", "skipped_stale", "held")


def run_pass(
    ctx: Ctx,
    spec: SwarmSpec,
    observations: Sequence[AttemptObservation],
    report: PassReport,
    inflight: InFlight | None = None,
) -> None:
    snap = snapshot(ctx.w, [o.seat for o in observations if o.state in ("failed", "gone")])
    report.paused = snap.paused
    failures = failures_of(snap, observations)
    ids = list(dict.fromkeys([*failures, *snap.work]))
    _advance(
        ctx, spec, snap=snap, failures=failures, wanted=ids, report=report, inflight=inflight or InFlight()
    )
    choices.apply_requests(ctx, spec, snap, report)


def run_one(
    ctx: Ctx, spec: SwarmSpec, observation: AttemptObservation, report: PassReport, inflight: InFlight
) -> bool:
    """The event-driven path: advance one failed attempt now, with the pass's steps and journal.

    False when there is nothing to do here: not the seat's current attempt, already handed to a
    launch, or another thread of this process (a pass) is advancing it.
    """
    snap = narrow(ctx.w, observation)
    report.paused = snap.paused
    failures = failures_of(snap, [observation])
    if not failures:
        return False
    claimed = _advance(
        ctx, spec, snap=snap, failures=failures, wanted=list(failures), report=report, inflight=inflight
    )
    return bool(claimed)


def _advance(
    ctx: Ctx,
    spec: SwarmSpec,
    *,
    snap: Snapshot,
    failures: dict[str, Failure],
    wanted: list[str],
    report: PassReport,
    inflight: InFlight,
) -> list[str]:
    """Fence, then advance, the attempts of ``wanted`` this process is not already advancing."""
    ids = inflight.claim(wanted)
    try:
        _phases(ctx, spec, snap=snap, failures=failures, ids=ids, report=report)
    finally:
        inflight.release(ids)
    return ids


def _phases(
    ctx: Ctx,
    spec: SwarmSpec,
    *,
    snap: Snapshot,
    failures: dict[str, Failure],
    ids: list[str],
    report: PassReport,
) -> None:
    index = spec.seat_index
    tasks = [index[f.seat].task.id for eid, f in failures.items() if f.seat in index and eid in ids]
    found, rows = attempts(ctx.w, ids, tasks)
    fan = Fanout(ctx)
    parts = {eid: PassReport() for eid in ids}
    # Phase 1, Redis only: fence every new failure before any Kubernetes call of this pass.
    for eid in ids:
        failure, att = failures.get(eid), found[eid]
        if failure is None or att.fence is not None or snap.work.get(eid) == "launch":
            continue
        try:
            with about_attempt(eid, failure.seat):
                fence = fence_step(fan.ctx, att, failure, parts[eid])
        except (InjectedFault, LeaseLost):
            _merge(report, parts, ids)
            raise
        except OperatorError as e:  # a known failure (Redis failing over, a WAIT timeout): its message
            log.warning("recovery of swarm %s: fencing %s failed (%s); retried next pass", ctx.label, eid, e)
            fence = None
        except Exception:
            log.exception("recovery of swarm %s: fencing %s failed; retried next pass", ctx.label, eid)
            fence = None
        if fence is None:
            del found[eid]
        else:
            found[eid] = dataclasses.replace(att, fence=fence)
    # Phase 2: each attempt's remaining steps; different attempts overlap.
    work: list[Callable[[], None]] = []
    for eid in ids:
        if eid in found:
            seat = _seat(found[eid], failures.get(eid))
            row_of = rows.get(index[seat].task.id) if seat in index else None
            work.append(
                _about(
                    eid,
                    seat,
                    _steps(
                        fan.ctx,
                        spec=spec,
                        att=found[eid],
                        failure=failures.get(eid),
                        snap=snap,
                        row=row_of,
                        part=parts[eid],
                    ),
                )
            )
    try:
        fan.run(work)
    finally:
        _merge(report, parts, ids)


def _about(eid: str, seat: str, task: Callable[[], None]) -> Callable[[], None]:
    """``task`` with its log lines naming the attempt and seat (:mod:`..logs`)."""

    def run() -> None:
        with about_attempt(eid, seat or None):
            task()

    return run


def _seat(att: Attempt, failure: Failure | None) -> str:
    return failure.seat if failure else (att.record.seat if att.record else "")


def _steps(
    ctx: Ctx,
    *,
    spec: SwarmSpec,
    att: Attempt,
    failure: Failure | None,
    snap: Snapshot,
    row: LedgerRow | None,
    part: PassReport,
) -> Callable[[], None]:
    """The remaining steps of one attempt, as a task for the pool."""
    eid = att.execution_id

    def run() -> None:
        try:
            if snap.work.get(eid) == "retire":  # a relaunched attempt's Pod, removal not confirmed yet
                finish_retire(ctx, eid, unsent=False)
                return
            if snap.work.get(eid) == "launch":
                if att.record is not None and launch_step(ctx, att.record, None) is not None:
                    part.launches.append(eid)
                return
            recover(ctx, spec, att, failure, paused=snap.paused, row=row, report=part)
        except (InjectedFault, LeaseLost):
            raise
        except OperatorError as e:  # a known failure (e.g. the API refused a call): its message says it
            log.warning("recovery of swarm %s: step of %s failed (%s); retried next pass", ctx.label, eid, e)
        except Exception:
            log.exception("recovery of swarm %s: step of %s failed; retried next pass", ctx.label, eid)

    return run


def _merge(report: PassReport, parts: dict[str, PassReport], ids: list[str]) -> None:
    for eid in ids:
        for name in _LISTS:
            getattr(report, name).extend(getattr(parts[eid], name))
