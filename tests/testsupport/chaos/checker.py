"""Decides, from a campaign's history alone, whether any promise of the product broke under its faults.

The promises (one function each, all run by :func:`check`):

* ``duplicate_replacement`` — a seat's generation is created once: a second
  Pod create for the same swarm, seat and generation is the same attempt run
  twice (two replacements for one fenced attempt).
* ``double_release`` — a grant or account slot is released once per attempt.
* ``lost_acknowledgement`` — a fence, decision or outcome acknowledged to its
  client is in the stores at the end, as acknowledged.
* ``stale_epoch`` — no write is accepted under an epoch older than the lease
  observed at that moment.
* ``epoch_without_takeover`` — the lease epoch moves only by takeovers the
  replicas counted (a churning lease the takeover alert cannot see), or by a
  take whose answer was lost and that the replica logged as such, or by an
  unconfirmed take whose holder was SIGKILLed while it waited for the
  replicas' answer; and it never goes back from an epoch a replica held
  confirmed.
* ``outcome_mismatch`` — a worker reports the continuity its launch directed,
  or a refusal with its reason; never anything else.
* ``two_live_agents`` — one live agent per seat: no model request from an
  attempt after the first request of a later generation of its seat (the
  attempts' seats and generations come from the Pod creates).
* ``internal_error`` — no client is answered ``500``: under a fault the API
  says what is temporary (503 with ``Retry-After``) or refused (4xx, 502); a
  500 is a failure nobody can act on.
* ``liveness`` — once the faults healed and the bound passed, every seat has a
  live attempt or a decision pending.

A violation names the invariant, the swarm, seat and attempt, and the history
lines of the two entries that conflict (or the one entry and what is missing).
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .history import Entry, Fault, Final, Heal, HistoryError, Lease, Op, Pod, Release, Request, Write, read


@dataclass(frozen=True)
class Violation:
    invariant: str
    swarm: str
    seat: str | None
    attempt: str | None
    first: Entry
    second: Entry | None
    detail: str

    def __str__(self) -> str:
        where = f"swarm {self.swarm}" + (f", seat {self.seat}" if self.seat else "")
        where += f", attempt {self.attempt}" if self.attempt else ""
        lines = f"line {self.first.line}" + (f" and line {self.second.line}" if self.second else "")
        return f"{self.invariant}: {where}: {self.detail} ({lines})"


def _timed(entries: Sequence[Entry]) -> list[Entry]:
    return sorted(entries, key=lambda e: (e.t, e.line))


def duplicate_replacement(entries: Sequence[Entry]) -> list[Violation]:
    created: dict[tuple[str, str, int], Pod] = {}
    out = []
    for e in _timed(entries):
        if not isinstance(e, Pod) or e.verb != "create":
            continue
        key = (e.swarm, e.seat, e.generation)
        if key in created:
            first = created[key]
            detail = f"generation {e.generation} created twice ({first.name} by {first.user or '?'}, "
            detail += f"then {e.name} by {e.user or '?'})"
            out.append(Violation("duplicate_replacement", e.swarm, e.seat, e.attempt, first, e, detail))
        else:
            created[key] = e
    return out


def double_release(entries: Sequence[Entry]) -> list[Violation]:
    applied: dict[tuple[str, str, str], Release] = {}
    out = []
    for e in _timed(entries):
        if not isinstance(e, Release) or not e.applied:
            continue
        key = (e.swarm, e.attempt, e.target)
        if key in applied:
            detail = f"the {e.target} released twice"
            out.append(Violation("double_release", e.swarm, None, e.attempt, applied[key], e, detail))
        else:
            applied[key] = e
    return out


def lost_acknowledgement(entries: Sequence[Entry]) -> list[Violation]:
    finals = {e.swarm: e for e in entries if isinstance(e, Final)}
    out = []
    for e in entries:
        if not isinstance(e, Op) or e.result != "ok":
            continue
        final = finals.get(e.swarm)
        missing = _missing(e, final)
        if missing:
            out.append(Violation("lost_acknowledgement", e.swarm, e.seat, e.attempt, e, final, missing))
    return out


def _missing(op: Op, final: Final | None) -> str:
    if final is None:
        return f"acknowledged {op.op}, and the history has no final state for the swarm"
    if op.op == "fence" and op.attempt not in final.fences:
        return "acknowledged fence missing from the final state"
    if op.op == "decision" and final.decisions.get(op.attempt) != op.choice:
        held = final.decisions.get(op.attempt)
        return f"acknowledged decision {op.choice!r}, the final state holds {held!r}"
    if op.op == "outcome" and final.outcomes.get(op.attempt) != op.reported:
        held = final.outcomes.get(op.attempt)
        return f"acknowledged outcome {op.reported!r}, the final state holds {held!r}"
    return ""


def stale_epoch(entries: Sequence[Entry]) -> list[Violation]:
    lease: dict[str, Lease] = {}
    out = []
    for e in _timed(entries):
        if isinstance(e, Lease):
            lease[e.swarm] = e
        elif isinstance(e, Write) and e.accepted:
            current = lease.get(e.swarm)
            if current is not None and e.epoch < current.epoch:
                detail = f"{e.what} accepted under epoch {e.epoch} while the lease was at {current.epoch}"
                out.append(Violation("stale_epoch", e.swarm, None, e.attempt, current, e, detail))
    return out


#: How soon after an observation of its unconfirmed take a SIGKILL of the holder means it died waiting
#: for the replicas' answer (``WAIT``'s 1 s timeout, the recorder's look and margin).
DIED_WAITING_S = 3.0


def _died_waiting(entries: Sequence[Entry]) -> dict[str, set[int]]:
    """Epochs, by swarm, first observed held by a take no replica confirmed whose holder was SIGKILLed
    within :data:`DIED_WAITING_S` after: the take moved the epoch while its process waited for
    ``WAIT``'s answer, and the process was gone before it could count or log anything. (A replica's
    counter dies with it anyway; its log line is all the campaign can read, and it never came.)"""
    kills = [e for e in entries if isinstance(e, Fault) and e.fault == "kill9"]
    seen: set[tuple[str, int]] = set()
    out: dict[str, set[int]] = defaultdict(set)
    for e in _timed(entries):
        if not isinstance(e, Lease) or (e.swarm, e.epoch) in seen:
            continue
        seen.add((e.swarm, e.epoch))
        if e.confirmed or not e.holder:
            continue
        if any(k.target == e.holder and e.t <= k.t <= e.t + DIED_WAITING_S for k in kills):
            out[e.swarm].add(e.epoch)
    return out


def epoch_without_takeover(entries: Sequence[Entry]) -> list[Violation]:
    """Epochs moved since the swarm's first observation against takeovers counted since then. The
    recorder reads the epoch before it scrapes the counters, and a replica counts a takeover just
    after its script returns: a shortfall counts only when the next observation (or none) still shows it.
    """
    by_swarm: dict[str, list[Lease]] = defaultdict(list)
    for e in _timed(entries):
        if isinstance(e, Lease):
            by_swarm[e.swarm].append(e)
    died = _died_waiting(entries)
    out = []
    for swarm, leases in by_swarm.items():
        first, held = leases[0], None

        def _short(first: Lease, e: Lease, died: set[int] = died[swarm]) -> int:
            return _uncounted(first, e) - sum(1 for d in died if first.epoch < d <= e.epoch)

        for i, e in enumerate(leases):
            # an epoch no replica held confirmed (WAIT told its taker so) may vanish in a failover;
            # below one that was held, the epoch never goes
            if held is not None and e.epoch < held.epoch:
                detail = f"the epoch went back from {held.epoch} to {e.epoch}"
                out.append(Violation("epoch_without_takeover", swarm, None, None, held, e, detail))
                break
            if e.confirmed:
                held = e
            # A shortfall later observations explain is not one: a take whose answer was lost is
            # logged only once its socket times out (seconds after the epoch moved; with the
            # network faults, often after the next observation), and each observation counts the
            # lines written by then. The last observation, taken after the heal and the liveness
            # bound, counts them all.
            short = _short(first, e)
            if short > 0 and all(_short(first, later) >= short for later in leases[i + 1 :]):
                detail = f"the epoch moved {e.epoch - first.epoch} times ({first.epoch} to {e.epoch})"
                detail += f" with {e.takeovers - first.takeovers} takeovers counted"
                detail += f" and {e.unanswered - first.unanswered} takes unanswered"
                gone = sum(1 for d in died[swarm] if first.epoch < d <= e.epoch)
                detail += f" ({gone} by takers killed while waiting for the replicas)" if gone else ""
                out.append(Violation("epoch_without_takeover", swarm, None, None, first, e, detail))
                break
    return out


def _uncounted(first: Lease, e: Lease) -> int:
    """Epoch moves since ``first`` that no counted takeover explains, nor a take that got no answer
    (the replica logged that the epoch may have moved: nobody can know more)."""
    return (e.epoch - first.epoch) - (e.takeovers - first.takeovers) - (e.unanswered - first.unanswered)


def outcome_mismatch(entries: Sequence[Entry]) -> list[Violation]:
    out = []
    for e in entries:
        if not isinstance(e, Op) or e.op != "outcome" or e.result != "ok":
            continue
        if e.reported == e.directive or (e.reported == "refused" and e.refusal):
            continue
        detail = f"directed {e.directive!r}, reported {e.reported!r}" + (
            " (a refusal without its reason)" if e.reported == "refused" else ""
        )
        out.append(Violation("outcome_mismatch", e.swarm, e.seat, e.attempt, e, None, detail))
    return out


def two_live_agents(entries: Sequence[Entry]) -> list[Violation]:
    """A request of an attempt after the first request of a later generation of the same seat."""
    where: dict[str, tuple[str, str, int]] = {}
    for e in entries:
        if isinstance(e, Pod) and e.verb == "create":
            where.setdefault(e.attempt, (e.swarm, e.seat, e.generation))
    first: dict[tuple[str, str, int], Request] = {}
    out = []
    for e in _timed(entries):
        if not isinstance(e, Request) or e.attempt not in where:
            continue
        swarm, seat, generation = where[e.attempt]
        later = [r for (s, t, g), r in first.items() if (s, t) == (swarm, seat) and g > generation]
        if later:
            newer = min(later, key=lambda r: (r.t, r.line))
            detail = f"{e.attempt} (generation {generation}) spoke after {newer.attempt} had begun"
            out.append(Violation("two_live_agents", swarm, seat, e.attempt, newer, e, detail))
        first.setdefault((swarm, seat, generation), e)
    return out


def internal_error(entries: Sequence[Entry]) -> list[Violation]:
    out = []
    for e in _timed(entries):
        if isinstance(e, Op) and (e.answer or "").split(" ")[0] == "500":
            detail = f"the {e.op} was answered {e.answer!r}: a fault the API did not name"
            out.append(Violation("internal_error", e.swarm, e.seat, e.attempt, e, None, detail))
    return out


def liveness(entries: Sequence[Entry], bound_s: float) -> list[Violation]:
    heals = [e for e in entries if isinstance(e, Heal)]
    finals = [e for e in entries if isinstance(e, Final)]
    if not finals:
        return []
    if not heals:
        raise HistoryError("the history has final states but no heal entry: liveness cannot be judged")
    healed = max(heals, key=lambda e: e.t)
    out = []
    for final in finals:
        if final.t < healed.t + bound_s:
            raise HistoryError(
                f"history line {final.line}: the final state of {final.swarm} was taken "
                f"{final.t - healed.t:.1f} s after the heal, before the {bound_s:.0f} s liveness bound"
            )
        for seat, state in sorted(final.seats.items()):
            if state.live is None and not state.pending_decision:
                detail = f"no live attempt and no pending decision {bound_s:.0f} s after the faults healed"
                detail += f" (seen: {state.seen})" if state.seen else ""
                out.append(Violation("liveness", final.swarm, seat, None, final, healed, detail))
    return out


SAFETY: tuple[Callable[[Sequence[Entry]], list[Violation]], ...] = (
    duplicate_replacement,
    double_release,
    lost_acknowledgement,
    stale_epoch,
    epoch_without_takeover,
    outcome_mismatch,
    two_live_agents,
    internal_error,
)


def check(entries: Sequence[Entry], *, liveness_bound_s: float = 60.0) -> list[Violation]:
    """Every violation in ``entries``, safety first, each in history order."""
    found = [v for rule in SAFETY for v in rule(entries)]
    return found + liveness(entries, liveness_bound_s)


def summary(entries: Sequence[Entry]) -> dict[str, int]:
    """How many entries of each kind (and operations by result) the history holds."""
    counts: dict[str, int] = defaultdict(int)
    for e in entries:
        counts[e.kind] += 1
        if isinstance(e, Op):
            counts[f"op:{e.result}"] += 1
    return dict(sorted(counts.items()))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m testsupport.chaos.checker HISTORY [BOUND_S]``: prints each violation; 1 when any."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print("usage: python -m testsupport.chaos.checker HISTORY [LIVENESS_BOUND_S]", file=sys.stderr)
        return 2
    try:
        entries = read(Path(args[0]))
        violations = check(entries, liveness_bound_s=float(args[1]) if len(args) > 1 else 60.0)
    except (OSError, HistoryError, ValueError) as e:
        print(f"checker: {e}", file=sys.stderr)
        return 2
    for v in violations:
        print(v)
    print(f"{len(violations)} violations in {len(entries)} entries {summary(entries)}")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
