"""The event-driven recovery path: a Pod event that shows its attempt failed starts that attempt's recovery.

Without it a failure waited for the swarm's next whole pass (lease, seat check,
Pod and Node lists, every failure fenced before any launch). Here the Pod
watch event alone starts fence → releases → decide → launch ‖ retire for that
one attempt (``Recovery.recover_one``: the pass's steps, the same journal) on
one bounded pool shared by every swarm of this operator, so attempts never
wait for each other or for a pass.

Only failures the Pod itself shows are taken here: ``oom_killed``,
``evicted`` and ``application_exit``. A lost node needs the Nodes, and an image
pull failure needs its grace counted in Redis, so those (and a Pod that
vanished) stay with the periodic pass, which remains the safety net for
everything: it takes up from the journal whatever this path left.

Only the current lease holder acts: a replica that does not hold the swarm's
lease (or has never held it) does nothing on the event. Within one process
the pass and this path never advance the same attempt at once (the Recovery's
in-flight set); across processes the lease and the journal guard it. When the
last recovery in flight for a swarm ends, the swarm's daemon is woken, and its
pass publishes the Events and the status and deletes the leftovers, off the
critical path; other Pod events of a swarm that has recoveries in flight
(its replacements appearing) wait for that same wake (:meth:`Pipeline.defer`)
instead of starting passes that would compete with the recoveries for the API
server.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import redis
from pydantic import ValidationError

from .. import logs
from ..errors import OperatorError
from ..recovery import LeaseLost
from ..recovery.models import AttemptObservation
from ..swarm import SwarmSpec
from .building.pods import label, owned_by
from .observing.classify import DISRUPTIONS, classify
from .observing.observe import SUPERSEDED
from .swarmpass import SwarmPass

log = logging.getLogger(__name__)
#: Failure reasons a Pod event alone establishes (see the module doc).
POD_ONLY = frozenset({"oom_killed", "evicted", "application_exit"})
#: Attempts recovered at once across all swarms; bounded so a mass failure does not flood the API server.
WORKERS = 16


def failed_attempt(pod: Mapping[str, Any], swarm: str) -> AttemptObservation | None:
    """The failure of the attempt ``pod`` runs, when the Pod alone shows one (else ``None``)."""
    meta = pod.get("metadata") or {}
    if not owned_by(pod, swarm) or meta.get("deletionTimestamp"):
        return None
    verdict = classify(pod)
    if verdict.state != "failed" or verdict.reason not in POD_ONLY or _unknown_disruption(pod):
        return None
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    try:
        return AttemptObservation(
            execution_id=str(labels.get(label("execution-id"), "")),
            seat=str(annotations.get(label("seat"), "")),
            generation=int(labels.get(label("generation"), "0")),
            state="failed",
            reason=verdict.reason,
            superseded_legacy=annotations.get(SUPERSEDED[0]) == SUPERSEDED[1],
        )
    except (ValidationError, ValueError):
        return None  # not one of ours after all; the pass looks at it


def _unknown_disruption(pod: Mapping[str, Any]) -> bool:
    """A disruption whose cause the Pod does not name as an eviction (``DeletionByPodGC`` after its
    Node was deleted, a reason newer than this operator): what it means may need the Nodes."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "DisruptionTarget" and cond.get("status") == "True":
            return str(cond.get("reason")) not in DISRUPTIONS
    return False


@dataclass(frozen=True)
class Lane:
    """One swarm's part: its pass (lease, Recovery), its current spec and how to wake its daemon."""

    runner: SwarmPass
    spec: Callable[[], SwarmSpec]
    wake: Callable[[], None]
    stopping: Callable[[], bool]


class Pipeline:
    """The operator's event-driven recovery: every swarm's failed attempts on one bounded pool."""

    def __init__(self, workers: int = WORKERS) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pipeline")
        self._lanes: dict[tuple[str, str], Lane] = {}
        #: Recoveries submitted and not finished, per swarm.
        self._busy: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        #: Recoveries this path started and finished with work done (for tests and logs).
        self.recovered = 0

    def register(self, key: tuple[str, str], lane: Lane) -> None:
        with self._lock:
            self._lanes[key] = lane

    def unregister(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._lanes.pop(key, None)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def offer(self, key: tuple[str, str], pod: Mapping[str, Any]) -> bool:
        """Start the recovery of the attempt ``pod`` shows failed; False when the event is the pass's."""
        with self._lock:
            lane = self._lanes.get(key)
        if lane is None or lane.stopping() or not lane.runner.recovery.epoch:
            return False  # no daemon yet, stopping, or never the lease holder: nothing happens here
        observation = failed_attempt(pod, key[1])
        if observation is None:
            return False
        with self._lock:
            self._busy[key] = self._busy.get(key, 0) + 1
        try:
            self._pool.submit(self._recover, key, lane, observation)
        except RuntimeError:  # the pool is shut down: the operator is stopping
            self._done(key)
            return False
        return True

    def defer(self, key: tuple[str, str]) -> bool:
        """True when the swarm has recoveries in flight: its daemon is woken when the last one ends."""
        with self._lock:
            return self._busy.get(key, 0) > 0

    def _done(self, key: tuple[str, str]) -> bool:
        """Count one recovery of ``key`` finished; True when it was the last one in flight."""
        with self._lock:
            left = self._busy.get(key, 1) - 1
            if left > 0:
                self._busy[key] = left
                return False
            self._busy.pop(key, None)
            return True

    def _recover(self, key: tuple[str, str], lane: Lane, observation: AttemptObservation) -> None:
        with logs.about_swarm(*key), logs.about_attempt(observation.execution_id):
            self._recover_in(key, lane, observation)

    def _recover_in(self, key: tuple[str, str], lane: Lane, observation: AttemptObservation) -> None:
        name, eid = lane.runner.owner.name, observation.execution_id
        try:
            if lane.stopping() or not lane.runner.recovery.epoch:
                return
            lane.runner.keepalive()  # renews a lease a third old; LeaseLost when another holds it
            report = lane.runner.recovery.recover_one(lane.spec(), observation)
            if report is not None and not report.lease_lost:
                lane.runner.announce(report.launches)
                self.recovered += 1
                log.debug("swarm %s: %s recovered from its Pod event (%s)", name, eid, report.launches)
        except LeaseLost:
            log.info("swarm %s: the lease is gone; %s is left to its holder", name, eid)
        except (OperatorError, redis.RedisError) as e:  # a known failure: the pass retries
            log.warning(
                "swarm %s: recovery of %s from its Pod event failed (%s); the pass retries", name, eid, e
            )
        except Exception:
            log.exception("swarm %s: recovery of %s from its Pod event failed; the pass retries", name, eid)
        finally:
            if self._done(key):  # the pass publishes Events and status, cleans up, takes up anything left
                lane.wake()
