"""Resuming a held recovery with the operator's observation.

Everything that can be checked is checked before anything is sent: the
record exists and is not being resumed (``checkpoint_not_found``), the token
matches in constant time (``resume_token_invalid``), every ``observed`` entry
names a step that waits for one with a value it takes (``observed_invalid``),
every held or unknown write is answered (``observed_required``), and the plan
is the one that was held (``plan_changed``). Then one script claims the record;
a second resume of the same call finds it taken. ``applied`` records the
release without sending it; ``not_applied`` sends it again through the
journal. A recovery that still does not finish keeps its call and gets a new
token; one that finishes is dropped; an internal error drops it too
(``resume_failed``).
"""

from __future__ import annotations

import hmac
import logging
from typing import Any

from ..swarm import SwarmSpec
from . import held
from .context import Ctx
from .errors import InjectedFault, LeaseLost, ResumeRefused
from .models import PassReport, RecoveryProgress, StepProgress
from .steps.account import STEP, confirm, send
from .steps.fencing import recover
from .store.reads import Attempt, one
from .store.records import HeldRecovery, StepStatus

log = logging.getLogger("agentihooks.recovery")

STEPS = ("fence", "release_grant", "release_account", "retire", "decide")
WAITING = ("unknown", "held", "failed")
_ORDER: tuple[StepStatus, ...] = ("held", "unknown", "failed", "skipped")


def _status(att: Attempt, path: str) -> StepStatus:
    fence = att.fence
    if path == "fence":
        return "ok" if fence else "skipped"
    kind = {"release_grant": "grant", "release_account": "account"}.get(path)
    if kind is not None and fence is not None and kind in fence.released:
        return "ok"
    status = att.step(path)
    if path == "decide":
        # ``held`` is how the journal keeps recovery_pending: the decision step ran.
        return "ok" if status in ("ok", "held") else "skipped"
    if status is None:
        return "skipped"
    return status  # type: ignore[return-value]


def progress_of(att: Attempt, kept: frozenset[str] = frozenset()) -> list[StepProgress]:
    out = []
    for path in STEPS:
        status = _status(att, path)
        out.append(
            StepProgress(
                path=path,
                status=status,
                accepts=list(held.ACCEPTS) if status in WAITING else None,
                resumed="kept" if path in kept and status == "ok" else None,
            )
        )
    return out


def answer_of(
    rec: HeldRecovery, att: Attempt, *, token: str | None, kept: frozenset[str], error: str | None = None
) -> RecoveryProgress:
    steps = progress_of(att, kept)
    statuses = [s.status for s in steps]
    overall: StepStatus = next((s for s in _ORDER if s in statuses), "ok")
    counts = ", ".join(f"{statuses.count(s)} {s}" for s in ("ok", *_ORDER) if s in statuses)
    return RecoveryProgress(
        call=rec.call,
        execution_id=rec.execution_id,
        seat=rec.seat,
        status=overall,
        progress=steps,
        summary=f"{len(steps)} steps: {counts}",
        resume_token=token,
        error=error,
    )


def check(
    ctx: Ctx, spec: SwarmSpec | None, call: str, token: str, observed: dict[str, str]
) -> tuple[HeldRecovery, Attempt]:
    """Every refusal, before anything is written or sent."""
    rec = held.get(ctx, call)
    if rec is None or rec.state != "held":
        raise ResumeRefused(
            "checkpoint_not_found", f"no held recovery {call}: finished, expired, dropped or being resumed"
        )
    if not hmac.compare_digest(held.token_hash(token).encode(), rec.token_hash.encode() or b"-"):
        raise ResumeRefused("resume_token_invalid", "the resume token is not the latest one of this recovery")
    att, _ = one(ctx.w, rec.execution_id)
    by = {s.path: s for s in progress_of(att)}
    bad: list[dict[str, object]] = []
    for path, value in observed.items():
        step = by.get(path)
        if step is None:
            bad.append({"step": path, "reason": "no such step", "accepts": []})
        elif step.status not in WAITING:
            bad.append({"step": path, "reason": f"the step is {step.status}", "accepts": []})
        elif value not in held.ACCEPTS:
            bad.append(
                {"step": path, "reason": f"value {value!r} is not accepted", "accepts": list(held.ACCEPTS)}
            )
    if bad:
        raise ResumeRefused("observed_invalid", "observed names steps or values that are not accepted", bad)
    need = [s for s in by.values() if s.status in ("unknown", "held") and s.path not in observed]
    if need:
        steps: list[dict[str, object]] = [
            {"step": s.path, "status": s.status, "accepts": list(held.ACCEPTS)} for s in need
        ]
        raise ResumeRefused(
            "observed_required", "a write whose outcome is unknown needs an observation", steps
        )
    broker = ctx.broker(spec)
    if att.fence is None or not hmac.compare_digest(
        held.plan_of(att.fence, rec.step, broker.url if broker else None), rec.plan
    ):
        raise ResumeRefused("plan_changed", "the recovery's plan changed since it was held; nothing was sent")
    return rec, att


def resume(
    ctx: Ctx, spec: SwarmSpec | None, call: str, token: str, observed: dict[str, str], *, paused: bool
) -> RecoveryProgress:
    rec, att = check(ctx, spec, call, token, observed)
    claimed = held.claim(ctx, call, held.token_hash(token))
    if claimed == "token":
        raise ResumeRefused("resume_token_invalid", "the resume token is not the latest one of this recovery")
    if claimed != "ok":
        raise ResumeRefused(
            "checkpoint_not_found", f"no held recovery {call}: being resumed by another request"
        )
    kept = frozenset(s.path for s in progress_of(att) if s.status == "ok")
    try:
        return _run(ctx, spec, rec, observed, paused=paused, kept=kept)
    except (InjectedFault, LeaseLost):
        # A simulated process death, or the lease moved on: nothing more may be written here. The
        # record stays claimed until it expires; a later pass then holds the step again if needed.
        raise
    except Exception as e:
        log.error(
            "recovery of swarm %s: resume of %s stopped (%s); its record is dropped",
            ctx.label,
            call,
            type(e).__name__,
        )
        try:
            held.drop(ctx, call)
        except Exception as dropped:
            log.error(
                "recovery of swarm %s: %s could not be dropped (%s)", ctx.label, call, type(dropped).__name__
            )
        now, _ = one(ctx.w, rec.execution_id)
        return answer_of(rec, now, token=None, kept=kept, error="resume_failed")


def _event(base: dict[str, Any], path: str, observed: str | None, *, sent: bool) -> dict[str, Any]:
    seen = f"observed {observed}, " if observed else ""
    detail = f"{path} resumed by {base['call']}: {seen}{'sent' if sent else 'not sent'}"
    return {**base, "path": path, "observed": observed, "sent": sent, "detail": detail}


def _run(
    ctx: Ctx,
    spec: SwarmSpec | None,
    rec: HeldRecovery,
    observed: dict[str, str],
    *,
    paused: bool,
    kept: frozenset[str],
) -> RecoveryProgress:
    eid = rec.execution_id
    value = observed.get(rec.step, "not_applied")
    base: dict[str, Any] = {
        "execution_id": eid,
        "seat": rec.seat,
        "call": rec.call,
        "path": rec.step,
        "resumed": True,
    }
    token: list[str | None] = []
    broker = ctx.broker(spec)
    with ctx.lock_for(eid):
        att, _ = one(ctx.w, eid)
        fence = att.fence
        if fence is None:
            raise RuntimeError("the held attempt has no fence")  # checked by the plan; answered resume_failed
        if "account" in fence.released:
            outcome = "ok"
        elif value == "applied":
            confirm(ctx, eid, "reported", [_event(base, rec.step, "applied", sent=False)])
            outcome = "ok"
        elif broker is None or rec.step != STEP:
            raise RuntimeError("no broker to send the held step to")
        else:

            def hold() -> None:
                token.append(held.hold_again(ctx, rec, held=True, detail="account broker cannot be observed"))

            outcome = send(ctx, fence, broker, hold, [_event(base, rec.step, "not_applied", sent=True)])
    if outcome == "failed":
        token.append(held.hold_again(ctx, rec, held=False, detail="the broker refused the release"))
    if outcome != "ok":
        now, _ = one(ctx.w, eid)
        return answer_of(rec, now, token=token[-1] if token else None, kept=kept)
    before, _ = one(ctx.w, eid)
    if spec is not None:
        recover(ctx, spec, before, None, paused=paused, row=None, report=PassReport())
    after, _ = one(ctx.w, eid)
    ran = [p for p in ("retire", "decide") if _status(before, p) != _status(after, p)]
    if ran:
        events = [_event(base, p, None, sent=True) for p in ran]
        ctx.w.run("marks", {"step_events": events})
    held.drop(ctx, rec.call)
    return answer_of(rec, after, token=None, kept=kept)
