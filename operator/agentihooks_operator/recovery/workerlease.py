"""The controller's half of the worker lease: how long a lost attempt may still be running.

A fenced attempt loses its authority at once, but a fence cannot stop a
process on a node the controller no longer reaches. Each worker therefore
holds a lease on its attempt, renewed through the control API; a worker that
cannot renew stops its agent before the lease can have run out, measured on
its own monotonic clock from the moment it *sent* the last renewal the
controller acknowledged.

The controller stamps each renewal with its swarm clock (Redis ``TIME``)
when the renewal script runs, which is after the worker sent it. So the
lease as the controller sees it never ends before the worker's. When an
attempt's death is not proven (its node lost, its Pod gone or deleted while
its containers still ran), its replacement is launched only once
``last renewal + lease + margin`` has passed on that clock. The margin covers
what the two clocks may disagree on: a monotonic clock running a little fast
(1 % of the lease, far above real drift) and a jump of the swarm clock when
a Redis failover hands it to another server (:data:`BASE_MARGIN_MS`).

Proven deaths (every container of the Pod reported terminated) are replaced
at once: nothing of the attempt runs any more.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from ..swarm import SwarmSpec
from .context import Ctx
from .errors import RecoveryRefused
from .store.records import DecisionRecord, FenceRecord

log = logging.getLogger("agentihooks.recovery")

#: The fixed part of the margin: two Redis servers' clocks after a failover, a slow renewal answer.
BASE_MARGIN_MS = 5_000
#: The part that grows with the lease: a worker's monotonic clock running fast by up to 1 %.
RATE_MARGIN = 0.01
#: The launch-blocked reason while a replacement waits for its predecessor's lease.
WAIT_REASON = "old_attempt_live"


def lease_ms(spec: SwarmSpec | None, fallback: int | None) -> int | None:
    """The lease a new attempt is launched with: the Swarm's, else ``fallback`` (its predecessor's)."""
    return spec.recovery.worker_lease_seconds * 1000 if spec is not None else fallback


def margin_ms(lease_ms: int) -> int:
    """The clock margin added to a lease of ``lease_ms`` before a replacement may start."""
    return BASE_MARGIN_MS + int(lease_ms * RATE_MARGIN)


def stops_by_ms(renewed_at_ms: int, lease_ms: int) -> int:
    """When an attempt last renewed at ``renewed_at_ms`` has stopped its agent, at the latest."""
    return renewed_at_ms + lease_ms + margin_ms(lease_ms)


def _at(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def wait_message(until_ms: int) -> str:
    """What the card, ``status`` and the journal say while a replacement waits."""
    return f"waiting for the old attempt to stop until {_at(until_ms)}"


def confirm_stopped(ctx: Ctx, seat: str, execution_id: str | None, by: str) -> tuple[FenceRecord, bool]:
    """The operator's word that the seat's fenced attempt (``execution_id``, default the seat's last
    fenced one) has stopped: its replacement no longer waits for its lease. Returns the fence and
    whether this was said before (``replayed``). Raises ``RecoveryRefused``: ``not_fenced`` (no such
    fenced attempt of the seat), ``not_waiting`` (nothing waits for it)."""
    if execution_id is None:
        raw = ctx.w.client.hget(ctx.w.keys.seat_handoffs, seat)
        ctx.w.trip()
        execution_id = raw.decode() if isinstance(raw, bytes) else raw
        if execution_id is None:
            raise RecoveryRefused("the seat has no fenced attempt", reason="not_fenced")
    answer = ctx.w.run("confirm_stopped", {"execution_id": execution_id, "seat": seat, "by": by})
    if not answer["ok"]:
        if answer["refused"] == "not_waiting":
            raise RecoveryRefused(
                "nothing waits for this attempt: its death was proven, or its lease has run out",
                reason="not_waiting",
            )
        raise RecoveryRefused("no such fenced attempt of this seat", reason="not_fenced")
    fence = FenceRecord.model_validate_json(answer["fence"])
    decided = ctx.w.client.hget(ctx.w.keys.attempt_recoveries, execution_id)
    ctx.w.trip()
    if decided is not None:  # its replacement's launch goes out at the next pass, not at its old time
        replacement = DecisionRecord.model_validate_json(decided).replacement
        if replacement is not None:
            ctx.waits.done(replacement)
    if not answer.get("replayed"):
        log.warning(
            "recovery of swarm %s: %s confirmed that %s (seat %s) has stopped: its replacement no longer "
            "waits for its lease (it would have until %s)",
            ctx.label,
            by,
            execution_id,
            seat,
            _at(fence.waited_until_ms or 0),
        )
    return fence, bool(answer.get("replayed"))
