"""Which observed attempts are failures to act on now, and the narrow read the event path needs.

Shared by the pass (:func:`.passes.run_pass`, over the swarm's snapshot) and the
event-driven path (:func:`.passes.run_one`, over :func:`narrow`: what the
snapshot says about one attempt, in one round trip instead of the whole
swarm's hashes).
"""

from __future__ import annotations

from collections.abc import Sequence

from .models import AttemptObservation
from .steps.fencing import Failure
from .store.reads import Snapshot
from .store.writer import Writer


def narrow(w: Writer, o: AttemptObservation) -> Snapshot:
    """What :func:`snapshot` says about one attempt, read in one round trip."""
    k = w.keys
    pipe = w.client.pipeline(transaction=False)
    pipe.hget(k.seats, o.seat)
    pipe.hget(k.recovery_work, o.execution_id)
    pipe.exists(k.recovery_paused)
    pipe.hexists(k.restore_refusals, o.execution_id)
    current, work, paused, refused = pipe.execute()
    w.trip()
    return Snapshot(
        seats={o.seat: _text(current)} if current is not None else {},
        work={o.execution_id: _text(work)} if work is not None else {},
        paused=bool(paused),
        requests={},
        refused=frozenset([o.execution_id]) if refused else frozenset(),
    )


def _text(v: object) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def failures_of(snap: Snapshot, observations: Sequence[AttemptObservation]) -> dict[str, Failure]:
    failures: dict[str, Failure] = {}
    for o in observations:
        if o.state not in ("failed", "gone") or snap.work.get(o.execution_id) == "launch":
            continue
        if snap.seats.get(o.seat) != o.execution_id:
            continue  # not the seat's current attempt (an old, already fenced Pod)
        if o.execution_id in snap.refused:
            continue  # it refused its restore and reported it: it waits for a relaunch, nothing failed
        reason = o.reason or ("application_exit" if o.state == "failed" else "node_lost")
        failures[o.execution_id] = Failure(
            o.execution_id, o.seat, o.generation, reason, o.superseded_legacy, proven=o.death_proven
        )
    return failures
