"""Refused restores and relaunches: a replacement that could not deliver its directive, and what follows.

A replacement that refuses its restore (its harness version changed, an object
of the checkpoint is damaged, the store is unreachable, ...) reports the
refusal before it exits. Its seat's accepted decision stays accepted and the
exit is not a failure of the task: the pass fences nothing for it and offers
nothing new. The card says ``restore refused: REASON`` with a hint of what to
fix. Once the operator fixed the cause (for example set the Swarm's image to
one with the captured harness version), a relaunch launches the same directive
again as the seat's next generation, restoring from the same checkpoint of the
same fenced attempt (the directive and ``restore_from`` are copied, so the
checkpoint lookup follows the seat's lineage rather than the refused attempt's
own id, under which no checkpoint exists).

A relaunch runs under the lease like every write: one script gives the refused
attempt's authority up, admits the next generation and marks its launch and
the refused Pod's removal ``unknown``; then the Pod is created and the refused
one removed, each marked ``ok``. A crash after the script leaves both steps to
the next pass (observed before being sent again). Each refused attempt is
relaunched at most once; asking again answers the same relaunch.
"""

from __future__ import annotations

import json
import re

from agentihooks_checkpoint.directive import Continuity
from agentihooks_checkpoint.reasons import NO_STORE_MESSAGE, REASON_CAP, SOURCE_PREFIX, reason_token

from ..swarm import SwarmSpec
from . import reverify, workerlease
from .context import Ctx, new_execution_id, new_grant_id
from .errors import NOT_REFUSED, InvalidInput, RecoveryRefused
from .models import EXECUTION_RE, RelaunchResult, RestoreRefusedView
from .policy import FRESH
from .steps.launching import launch_step, mint
from .store.reads import Attempt, one
from .store.records import AttemptRecord, GrantRecord, RefusalRecord

NOT_REPLACEMENT = "only a replacement with an accepted directive reports a refused restore"
NOT_CURRENT = "this replacement is no longer the seat's current attempt"
ALREADY_REPORTED = "this replacement already reported its restore outcome"
#: Refusal tokens a worker reports (the spec's reasons and the worker's own: ``source``,
#: ``no_checkpoint_store``, ``outcome_refused``, ...).
REASON_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
MESSAGE_CAP = 500
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

#: What to fix before relaunching, by refusal reason.
FIX_HINTS: dict[str, str] = {
    "version_changed": (
        "the replacement's harness version differs from the one that wrote the session: set the Swarm's "
        "image to one with the captured harness version, then relaunch"
    ),
    "unqualified_version": (
        "the worker image's harness is not qualified for native resume (Claude Code 2.1, Codex 0.162): set "
        "the Swarm's image to a qualified one, then relaunch"
    ),
    "store_unreachable": (
        "the checkpoint store (or the control API) did not answer the worker: check that it is up and "
        "reachable from the worker Pods, then relaunch"
    ),
    "manifest_absent": (
        "the checkpoint record is missing from the store: relaunch resumes from the newest checkpoint that "
        "still verifies (offered_checkpoint), or relaunch --fresh"
    ),
    "corrupt_manifest": (
        "the checkpoint record was altered: relaunch resumes from the newest checkpoint that still verifies "
        "(offered_checkpoint; restore this one from backup first to resume from it), or relaunch --fresh"
    ),
    "missing_object": (
        "an object of the checkpoint is missing (never treat checkpoint objects as cache): relaunch resumes "
        "from the newest checkpoint that still verifies (offered_checkpoint), or relaunch --fresh"
    ),
    "corrupt_object": (
        "an object of the checkpoint is damaged or a hostile archive: relaunch resumes from the newest "
        "checkpoint that still verifies (offered_checkpoint; restore this one from backup first to resume "
        "from it), or relaunch --fresh"
    ),
    "inventory_mismatch": (
        "the checkpoint record's inventory contradicts itself: relaunch resumes from the newest checkpoint "
        "that still verifies (offered_checkpoint), or relaunch --fresh"
    ),
    "no_checkpoint_store": (
        "the worker has no checkpoint store: set checkpoint_remote or the store settings in the worker Pod, "
        "then relaunch"
    ),
    "store_config": "the worker's checkpoint store settings cannot work: fix the Pod's environment, relaunch",
    "forbidden_scope": (
        "the control API refused the worker's credential: check the Pod's credential Secret, then relaunch"
    ),
    "source": (
        "the captured source could not be applied: check AGENTIHOOKS_PROJECT_REMOTES and the project's "
        "remote, then relaunch"
    ),
    "outcome_refused": "the controller refused the worker's outcome: read the events, then relaunch",
    "context_only": "the checkpoint holds no native session: relaunch --fresh",
    "conversation_mismatch": "the checkpoint holds another session than the directive's: relaunch --fresh",
}
DEFAULT_HINT = "fix the cause the worker's restore_refused line names, then relaunch"


def hint_for(reason: str) -> str:
    return FIX_HINTS.get(reason_token(reason), DEFAULT_HINT)


def reason_ok(reason: str) -> bool:
    """A reason token, or one of the spec's two sentences (``source: <what>`` printable and bounded)."""
    if REASON_RE.fullmatch(reason) or reason == NO_STORE_MESSAGE:
        return True
    return (
        reason.startswith(SOURCE_PREFIX)
        and len(reason) <= REASON_CAP
        and len(reason) > len(SOURCE_PREFIX)
        and not _CONTROL.search(reason)
    )


def view(refusal: RefusalRecord) -> RestoreRefusedView:
    return RestoreRefusedView(
        execution_id=refusal.execution_id,
        reason=refusal.reason,
        message=refusal.message,
        hint=hint_for(refusal.reason),
        reported_at=refusal.reported_at_ms,
    )


def _clean(message: str) -> str:
    text = _CONTROL.sub(" ", message).strip()
    return text if len(text) <= MESSAGE_CAP else text[: MESSAGE_CAP - 3] + "..."


def report_refusal(ctx: Ctx, execution_id: str, reason: str, message: str) -> RefusalRecord:
    """Store the refusal ``execution_id``'s worker reported (the first report; a repeat returns it)."""
    if not isinstance(execution_id, str) or not EXECUTION_RE.fullmatch(execution_id):
        raise InvalidInput("not an execution id (expected exe-<32 hex>)")
    if not isinstance(reason, str) or not reason_ok(reason):
        raise InvalidInput(
            "a refusal reason is a lower-case token, 'source: <what>' or the spec's no-store sentence"
        )
    att, _ = one(ctx.w, execution_id)
    record = att.record
    if record is None or record.directive is None or record.restore_from is None:
        raise RecoveryRefused(NOT_REPLACEMENT, reason="not_replacement")
    if att.refusal is not None:
        return att.refusal
    draft = RefusalRecord(
        execution_id=execution_id,
        seat=record.seat,
        generation=record.generation,
        reason=reason,
        message=_clean(message),
    )
    payload = {
        "execution_id": execution_id,
        "reason": reason,
        "token": reason_token(reason),  # what the refusal counter is labelled with
        "refusal_json": draft.model_dump_json(),
    }
    ctx.point("before:refusal")
    answer = ctx.w.run("refusal", payload)
    ctx.point("after:refusal")
    if answer["ok"]:
        stored = RefusalRecord.model_validate_json(answer["refusal"])
        if reverify.damaged(stored):
            reverify.forget_refused(ctx, record)
        return stored
    if answer["refused"] == "reported":
        raise RecoveryRefused(ALREADY_REPORTED, reason="outcome_reported")
    raise RecoveryRefused(NOT_CURRENT, reason="not_current")


def _replayed(refusal: RefusalRecord, att: Attempt | None) -> RelaunchResult:
    assert refusal.relaunched_as is not None
    record = att.record if att is not None else None
    return RelaunchResult(
        seat=refusal.seat,
        refused=refusal.execution_id,
        replacement=refusal.relaunched_as,
        generation=record.generation if record is not None else refusal.generation + 1,
        directive=record.directive if record is not None else None,
        reason=refusal.reason,
        relaunched_by=refusal.relaunched_by,
        replayed=True,
    )


def _target(ctx: Ctx, seat: str, refused: str | None) -> tuple[Attempt, RelaunchResult | None]:
    """The refused attempt to relaunch, or the answer of a relaunch already made for it."""
    ctx.w.trip()
    raw = ctx.w.client.hget(ctx.w.keys.seats, seat)
    current = None if raw is None else (raw.decode() if isinstance(raw, bytes) else str(raw))
    if current is None:
        raise RecoveryRefused(NOT_REFUSED, reason="not_refused")
    att, _ = one(ctx.w, refused or current)
    if att.record is None or att.record.seat != seat:
        raise RecoveryRefused(NOT_REFUSED, reason="not_refused")
    if att.refusal is None:
        # Asked again after the relaunch: the seat's current attempt is the relaunch of a refusal.
        of = att.record.relaunch_of if refused is None else None
        if of is not None:
            before, _ = one(ctx.w, of)
            if before.refusal is not None and before.refusal.relaunched_as == att.execution_id:
                return before, _replayed(before.refusal, att)
        raise RecoveryRefused(NOT_REFUSED, reason="not_refused")
    if att.refusal.relaunched_as is not None:
        after, _ = one(ctx.w, att.refusal.relaunched_as)
        return att, _replayed(att.refusal, after)
    if att.execution_id != current:
        raise RecoveryRefused(NOT_REFUSED, reason="not_refused")
    return att, None


def relaunch(
    ctx: Ctx,
    spec: SwarmSpec | None,
    seat: str,
    relaunched_by: str,
    *,
    refused: str | None = None,
    fresh: bool = False,
) -> RelaunchResult:
    """Launch the seat's refused replacement's directive again as the next generation (or answer the
    relaunch already made for that refusal). ``fresh`` starts the next generation fresh instead."""
    if not relaunched_by or len(relaunched_by) > 200:
        raise InvalidInput("relaunched_by must name the operator or a master agent")
    if refused is not None and not EXECUTION_RE.fullmatch(refused):
        raise InvalidInput("not an execution id (expected exe-<32 hex>)")
    att, done = _target(ctx, seat, refused)
    if done is not None:
        return done
    record, refusal = att.record, att.refusal
    assert record is not None and refusal is not None
    _, row = one(ctx.w, att.execution_id, record.task_id)
    directive = FRESH if fresh else record.directive
    if not fresh and reverify.damaged(refusal):
        # the same checkpoint would be refused again: the newest one that verifies now instead
        directive = reverify.redirect(ctx, spec, record)
    new_record = AttemptRecord(
        execution_id=new_execution_id(),
        seat=seat,
        generation=record.generation + 1,
        task_id=record.task_id,
        task_generation=record.task_generation,
        grant_id=new_grant_id(),
        compatibility_key=spec.compatibility_key if spec is not None else record.compatibility_key,
        task_text=row.text if row is not None else record.task_text,
        directive=directive,
        # Kept for a fresh relaunch too: the replacement of that fenced attempt, whose outcome the
        # controller accepts only from a replacement.
        restore_from=record.restore_from,
        admitted_at_ms=ctx.now_ms(),
        epoch=ctx.w.epoch,
        relaunch_of=att.execution_id,
        store_namespace=record.store_namespace,
        replaces=record.replaces,
        worker_lease_ms=workerlease.lease_ms(spec, record.worker_lease_ms),
    )
    fenced = record.replaces or (record.restore_from.execution_id if record.restore_from else None)
    new = new_record.execution_id
    grant = GrantRecord(
        grant_id=new_record.grant_id, seat=seat, generation=new_record.generation, state="active"
    )
    ledger_recovery = None
    if fresh:
        ledger_recovery = json.dumps(
            {
                **(directive.model_dump(mode="json") if directive else {"recovery": Continuity.FRESH.value}),
                "status": "accepted",
                "fenced": record.restore_from.execution_id if record.restore_from else None,
                "replacement": new,
            }
        )
    token, digest = mint()
    payload = {
        "refused": att.execution_id,
        "execution_id": new,
        "attempt_json": new_record.model_dump_json(),
        "grant_json": grant.model_dump_json(),
        "cred_hash": digest,
        "relaunched_by": relaunched_by,
        "ledger_recovery_json": ledger_recovery,
        # A fresh relaunch is a fresh decision by whoever asked for it (a seat never turns fresh
        # unrecorded); any other relaunch carries out the accepted decision as it stands.
        "decision_of": fenced,
        "decision_fresh": fresh,
        "fresh_directive_json": FRESH.model_dump_json(),
        "marks": [
            [att.execution_id, "relaunch", "ok"],
            [new, "launch", "unknown"],
            [att.execution_id, "retire", "unknown"],
        ],
    }
    with ctx.lock_for(att.execution_id):
        ctx.point("before:relaunch")
        answer = ctx.w.run("relaunch", payload)
        ctx.point("after:relaunch")
    if not answer["ok"]:
        if answer["refused"] == "relaunched":  # another request relaunched it first
            first = RefusalRecord.model_validate_json(answer["refusal"])
            after, _ = one(ctx.w, first.relaunched_as or "")
            return _replayed(first, after)
        raise RecoveryRefused(NOT_REFUSED, reason="not_refused")
    launch_step(ctx, new_record, token)
    finish_retire(ctx, att.execution_id, unsent=True)
    return RelaunchResult(
        seat=seat,
        refused=att.execution_id,
        replacement=new,
        generation=new_record.generation,
        directive=directive,
        reason=refusal.reason,
        relaunched_by=relaunched_by,
        replayed=False,
    )


def finish_retire(ctx: Ctx, execution_id: str, *, unsent: bool) -> None:
    """Remove a relaunched attempt's Pod (``unsent``: known not sent yet; else only if it still exists)."""
    with ctx.lock_for(execution_id):
        if unsent or ctx.launcher.exists(execution_id):
            ctx.point("before:retire")
            ctx.launcher.retire(execution_id)
            ctx.point("after:retire")
        ctx.w.run("marks", {"marks": [[execution_id, "retire", "ok"]], "finish": [execution_id]})
