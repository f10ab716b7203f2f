"""One recovery pass of one swarm, against Kubernetes and Redis (blocking; kopf runs it in a thread).

Order: take or renew the lease (a non-holder stops here and writes nothing),
launch generation 1 for new seats, list the swarm's Pods and the Nodes,
classify every current attempt, hand the observations to
``Recovery.reconcile``, then publish what happened as Kubernetes Events and as
the Swarm's status (handoff cards and the printer-column counts), and last
delete what retired attempts left (``cleanup``: their Secret and ConfigMap,
kept off the path from a failure to its replacement's launch).

A Pod with the swarm's label but a ``controller-owner`` value other than the
swarm's ``agentihooks-swarm-<slug>`` is foreign: it is counted in the status
(``foreignPods``), reported once by a ``ForeignPod`` Warning Event on the Swarm
and a log line, and never fenced, deleted or replaced.

Events are posted by one background thread that holds back while a pass runs
(checked before every post, so at most one post already in flight overlaps a
new pass) and flushes its queue in order once the pass is over.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import redis

from ..logs import carry
from ..recovery import LeaseLost, PassReport, Recovery
from ..recovery.models import AttemptObservation
from ..recovery.store.keys import SwarmKeys
from ..recovery.store.records import AttemptRecord
from ..swarm import SwarmSpec
from .building.pods import OWNER_LABEL, Owner
from .client import KubeClient, describe_refusal
from .conditions import Verdict, of_pass, ready
from .crd import API_VERSION, PLURAL
from .errors import AccessDenied, ApiError
from .events import Notice, coalesced, notice_of_held, notice_of_telemetry
from .observing.observe import PullGrace, observe
from .observing.passreads import PassReads
from .observing.podcache import RESYNC_S, PodCache
from .retention_runs import RetentionRuns

log = logging.getLogger(__name__)
SWARMS = f"{API_VERSION}/{PLURAL}"
#: Telemetry entries read per pass to find the ones not yet published as Events.
TELEMETRY_WINDOW = 1000
#: How long an Event may wait for a running pass to finish before it is sent anyway (a liveness
#: guard against a stuck pass; a pass normally ends long before).
EVENT_DEFER_S = 30.0
#: How long closing a swarm's pass waits for the pass in flight to end (a stop's budget is the
#: Pod's grace period: the chart's 30 s, of which kopf gives a daemon 10 s to end).
CLOSE_WAIT_S = 10.0


@dataclass
class PassResult:
    leader: bool
    observations: list[AttemptObservation] = field(default_factory=list)
    report: PassReport | None = None
    status: dict[str, Any] = field(default_factory=dict)
    #: The ``Ready`` condition this pass found (``None``: this replica has nothing to say about it).
    ready: Verdict | None = None


class SwarmPass(PassReads):
    """Everything one swarm's passes share: clients, the Recovery instance and what was published."""

    def __init__(
        self,
        *,
        recovery: Recovery,
        redis_client: redis.Redis,
        keys: SwarmKeys,
        kube: KubeClient,
        owner: Owner,
        clock: Callable[[], int],
        node_lost_after_s: float = 40.0,
        closing: Callable[[], None] | None = None,
        lease_ms: int = 15000,
        cleanup: Callable[[], object] | None = None,
        refusals: Callable[[], list[ApiError]] | None = None,
        stopping: Callable[[], bool] | None = None,
        placed: Callable[[bool], bool] | None = None,
        pod_cache: PodCache | None = None,
    ) -> None:
        #: True once the operator was told to stop: from then on no pass takes the lease.
        self._stopping = stopping or (lambda: False)
        #: Whether this replica should hold the swarm now (the placement among replicas, see
        #: :mod:`.placement`; told whether it holds the lease now): when it says no, a holder
        #: hands the lease over between passes and a non-holder leaves it alone.
        self._placed = placed or (lambda holding: True)
        self._closing = closing
        self._cleanup = cleanup
        self._refusals = refusals
        self._renew_after_s = lease_ms / 3000
        #: How often an idle holder renews its lease between passes (a third of the TTL).
        self.renew_every_s = self._renew_after_s
        self._renewed_at = 0.0
        self._lease_ms = lease_ms
        #: Since when (monotonic) this non-holder has seen nobody hold the lease (``None``: held).
        self._unheld_since: float | None = None
        self.recovery = recovery
        self.retention = RetentionRuns(recovery)
        self.kube = kube
        self.owner = owner
        self.clock = clock
        self.node_lost_after_s = node_lost_after_s
        self.grace = PullGrace(redis_client, keys, clock)
        self.redis = redis_client
        self.keys = keys
        self._init_reads(redis_client, keys, node_lost_after_s, pod_cache)
        #: The ``metadata.generation`` the current pass's spec was read at (``status.observedGeneration``).
        self._generation: int | None = None
        #: The handoff cards last built, what they were built from, and when they must be rebuilt anyway.
        self._cards: list[dict[str, Any]] = []
        self._cards_from: tuple[int, str | None] | None = None
        self._cards_due = 0.0
        self._newest_event: str | None = None
        self._last_status: dict[str, Any] | None = None
        self._seen_events: set[str] | None = None
        #: Foreign Pods already reported (reported again if one goes away and comes back).
        self._foreign_seen: set[str] = set()
        self._poster = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"events-{owner.name}")
        self._idle = threading.Event()
        self._idle.set()
        #: Notices not yet taken by the poster thread, and whether a drain of them is queued.
        self._pending: list[Notice] = []
        self._pending_lock = threading.Lock()
        self._draining = False
        self._closed = False
        self._reads = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"reads-{owner.name}")
        #: Wall time of the last pass this replica ran as leader (the API's pass-duration gauge).
        self.last_pass_seconds: float | None = None

    # -- the pass ------------------------------------------------------------------------------
    def keepalive(self) -> None:
        """Renew the lease when a long pass has used a third of it; stop the pass if it is gone.

        The launcher calls this before every Kubernetes call the recovery core makes, so a pass
        over many failures never outlives its lease, and never creates a Pod after losing it.
        """
        if time.monotonic() - self._renewed_at < self._renew_after_s:
            return
        if not self.recovery.acquire():
            raise LeaseLost(f"the lease of swarm {self.owner.name} was lost during a pass")
        self._renewed_at = time.monotonic()

    def renew(self) -> bool:
        """Keep (or take) the lease between passes; never while the operator is stopping."""
        if self._stopping():
            return False
        if not self._placed(bool(self.recovery.epoch)):
            self._hand_over()
            return False
        if not self.recovery.acquire():
            return False
        self._renewed_at = time.monotonic()
        return True

    def after_failure(self) -> None:
        """A pass failed part-way (a temporary error): the next one reads the Pods and Nodes in full,
        under the lease and epoch this pass still holds."""
        self._resync()

    def _hand_over(self) -> None:
        """Release the lease if this replica holds it (between passes: nothing is in flight), so the
        replica the placement prefers takes it at its next renewal."""
        if self.recovery.epoch and self.recovery.release():
            log.info("swarm %s/%s: lease handed over (placement)", self.owner.namespace, self.owner.name)

    def run(self, spec: SwarmSpec, generation: int | None = None) -> PassResult:
        """One pass; calls RBAC refused (403), in a step or in the pass itself, end it as
        :class:`AccessDenied` naming each refused verb, resource and namespace. ``generation`` is the
        Swarm's ``metadata.generation`` read no later than ``spec``: the status says it observed it."""
        self._generation = generation
        self._take_refusals()  # any left by a pass that ended early belong to that pass
        self._idle.clear()
        try:
            result = self._run(spec)
        except AccessDenied:
            raise
        except ApiError as e:
            refused = self._take_refusals()
            if e.status == 403:
                raise _denied([e, *refused]) from e
            raise
        finally:
            self._idle.set()
        refused = self._take_refusals()
        if refused:  # steps the core logged and will retry; published above, reported here
            raise _denied(refused)
        return result

    def _take_refusals(self) -> list[ApiError]:
        return self._refusals() if self._refusals is not None else []

    def _run(self, spec: SwarmSpec) -> PassResult:
        t0 = time.perf_counter()
        if self._stopping():
            return PassResult(leader=False)
        if not self._placed(bool(self.recovery.epoch)):
            self._hand_over()
            return PassResult(leader=False, ready=self._unheld())
        if not self.recovery.acquire():  # refused: another replica holds it
            self._unheld_since = None
            return PassResult(leader=False)
        self._renewed_at = time.monotonic()
        self._unheld_since = None
        if self._seen_events is None:  # entries older than this process were published before
            self._seen_events = {e.id for e in self.recovery.events(TELEMETRY_WINDOW)}
        self.recovery.ensure_seats(spec)
        if self.recovery.epoch != self._epoch_seen:  # a new epoch: what happened meanwhile is unknown
            self._epoch_seen = self.recovery.epoch
            self._resync()
        t1 = time.perf_counter()
        nodes = self._reads.submit(carry(self._nodes))
        view = self._pods()
        attempts: list[AttemptRecord] | None = None
        if not view.full:  # only what a watch event, time or a Node may have changed (:mod:`.scope`)
            attempts = self._scope.chosen(view.pods, view.changed, self._touched)
            confirmed = self._confirm_absent(view, attempts)
            if confirmed is None and self._cache is not None:  # many: list them all instead
                self._cache.invalidate()
                view, attempts = self._pods(), None
            else:
                view = confirmed or view
        if attempts is None:
            attempts = self.recovery.current_attempts()
        foreign = self._split(view)
        changed = view.pods if view.full else {n: view.pods[n] for n in view.changed if n in view.pods}
        node_view = self._nodes_of(changed, nodes.result())

        def observed(chosen: list[AttemptRecord], pods: dict[str, Any]) -> list[AttemptObservation]:
            return observe(
                chosen,
                pods,
                node_view,
                grace=self.grace,
                grace_ms=spec.recovery.image_pull_grace_seconds * 1000,
                node_lost_after_s=self.node_lost_after_s,
                now_ms=self.clock(),
                foreign=foreign.keys(),
            )

        observations = self._recheck_gone(attempts, observed(attempts, view.pods), observed)
        self._scope.seen(observations, full=view.full)
        t2 = time.perf_counter()
        report = self.recovery.reconcile(spec, observations)
        t3 = time.perf_counter()
        if report.lease_lost or not report.leader:
            return PassResult(leader=False, observations=observations, report=report)
        try:
            # A holder that stalled past its lease (SIGSTOP, a long pause, a starved node) while
            # its pass wrote nothing publishes nothing either: another replica may have acted since.
            self.keepalive()
        except LeaseLost:
            return PassResult(leader=False, observations=observations, report=report)
        self._publish_events(report)
        self._report_foreign(foreign)
        status = self._publish_status(spec, report, foreign=len(foreign), full=view.full)
        blocked = [(c["seat"], c["launch_blocked"]) for c in self._cards if c.get("launch_blocked")]
        verdict = of_pass(blocked, paused=report.paused)
        if self._cleanup is not None:  # after the launches: off the failover's critical path
            self._cleanup()
        self.retention.maybe_start(spec)
        self.last_pass_seconds = time.perf_counter() - t0
        log.debug(
            "pass of %s: seats %.1f ms, observe %.1f ms, reconcile %.1f ms (%d fenced, %d launched), "
            "publish %.1f ms",
            self.owner.name,
            (t1 - t0) * 1e3,
            (t2 - t1) * 1e3,
            (t3 - t2) * 1e3,
            len(report.fenced),
            len(report.launches),
            (time.perf_counter() - t3) * 1e3,
        )
        return PassResult(leader=True, observations=observations, report=report, status=status, ready=verdict)

    def _unheld(self) -> Verdict | None:
        """``Ready=False`` once nobody has held the lease for longer than its TTL (the placement's
        replica is gone and none took over), as this non-holder sees it; ``None`` while it is held."""
        if self.recovery.lease_holder() is not None:
            self._unheld_since = None
            return None
        now = time.monotonic()
        if self._unheld_since is None:
            self._unheld_since = now
        waited = now - self._unheld_since
        if waited * 1000 <= self._lease_ms:
            return None
        return ready(
            False,
            "LeaseUnheld",
            f"no operator replica has held the lease of {self.owner.namespace}/{self.owner.name} "
            f"for over {self._lease_ms / 1000:g} s",
        )

    # -- publishing ----------------------------------------------------------------------------
    def close(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """Shut this swarm's pools down once its pass in flight has ended (waiting ``wait_s`` at most).

        At a stop kopf cancels the swarm's daemon, but the pass it awaited runs on in its thread; a
        pool shut down under it made its next read or Event fail (``cannot schedule new futures after
        shutdown``) and the operator's stop end in an error. An Event queued after this is dropped."""
        if not self._idle.wait(wait_s):
            log.warning(
                "swarm %s/%s: a pass still runs %g s into the stop; closing its pools under it",
                self.owner.namespace,
                self.owner.name,
                wait_s,
            )
        with self._pending_lock:
            self._closed = True
        self._poster.shutdown(wait=True)
        self._reads.shutdown(wait=True)
        if self._closing is not None:
            self._closing()

    def announce(self, launches: list[str]) -> None:
        """``Replaced`` Events for launches made outside a pass (the event-driven path), queued
        behind any pass like a pass's own."""
        for execution_id in launches:
            self._post(Notice("Replaced", f"attempt {execution_id} launched", execution_id=execution_id))

    def _post(self, notice: Notice) -> None:
        """Queue the Events of ``notice``; a single background thread sends them, off the pass. The
        notices queued while it is busy go out together, coalesced on the Swarm (:func:`.coalesced`)."""
        with self._pending_lock:
            if self._closed:  # stopping: an Event is a courtesy, the records in Redis are the truth
                return
            self._pending.append(notice)
            if self._draining:
                return
            self._draining = True
        try:
            self._poster.submit(carry(self._send))
        except RuntimeError:  # closed between the check and here: dropped, as after the close
            log.debug("swarm %s/%s: event dropped at the stop", self.owner.namespace, self.owner.name)

    def _send(self) -> None:
        with self._pending_lock:
            notices, self._pending = self._pending, []
            self._draining = False
        for event in coalesced(
            notices, swarm=self.owner.name, namespace=self.owner.namespace, swarm_uid=self.owner.uid
        ):
            # Recovery first: each post waits (a bounded time) while a pass runs, then goes in order.
            self._idle.wait(EVENT_DEFER_S)
            try:
                self.kube.create("events", self.owner.namespace, event)
            except ApiError as e:  # an Event is a courtesy; the records in Redis are the truth
                log.warning("could not post event %s: %s", event["reason"], e)

    def _publish_events(self, report: PassReport) -> None:
        seen = self._seen_events if self._seen_events is not None else set()
        newest = self.recovery.events(1)  # one entry: the window is read only when something is new
        self._newest_event = newest[-1].id if newest else None
        window = self.recovery.events(TELEMETRY_WINDOW) if newest and newest[-1].id not in seen else []
        for entry in window:
            if entry.id in seen:
                continue
            if entry.type == "held":  # one entry each time a step is held, and when it is resumed
                step = entry.path or "unknown"
                notice = notice_of_held(
                    entry.execution_id,
                    entry.seat,
                    step,
                    entry.parent_call,
                    resumed=bool(entry.resumed),
                    epoch=entry.epoch,
                )
            else:
                notice = notice_of_telemetry(
                    entry.type, entry.execution_id, entry.seat, entry.detail, entry.epoch
                )
            self._post(notice)
        if window:
            self._seen_events = {e.id for e in window}
        for execution_id in report.launches:
            self._post(Notice("Replaced", f"attempt {execution_id} launched", execution_id=execution_id))
        for refusal in report.refusals:
            msg = f"the recovery request for {refusal.execution_id} was refused: {refusal.reason}"
            self._post(Notice("RequestRefused", msg, execution_id=None, warning=True))

    def _report_foreign(self, foreign: dict[str, Any]) -> None:
        """One log line and one Warning Event per foreign Pod newly seen; the Pod itself is untouched."""
        expected = self.owner.owner_value
        for name in sorted(set(foreign) - self._foreign_seen):
            value = ((foreign[name].get("metadata") or {}).get("labels") or {}).get(OWNER_LABEL)
            found = f"controller-owner {value!r}" if value is not None else "no controller-owner label"
            msg = (
                f"pod {name} carries the swarm's label but {found} (this swarm's is {expected!r}); "
                "it is left alone: never fenced, deleted or replaced"
            )
            log.warning("swarm %s/%s: %s", self.owner.namespace, self.owner.name, msg)
            self._post(Notice("ForeignPod", msg, execution_id=None, warning=True))
        self._foreign_seen = set(foreign)

    def _publish_status(
        self, spec: SwarmSpec, report: PassReport, *, foreign: int = 0, full: bool = True
    ) -> dict[str, Any]:
        """Patch the Swarm's status when it changed; the handoff cards are rebuilt only when a verdict,
        the telemetry stream or this pass's report moved (or on a full pass, and every ``RESYNC_S``)."""
        source = (self._scope.moves, self._newest_event)
        if full or source != self._cards_from or _acted(report) or time.monotonic() >= self._cards_due:
            cards = [c.model_dump(mode="json", exclude={"outcome"}) for c in self.recovery.cards(spec)]
            self._cards, self._cards_from = cards, source
            self._cards_due = time.monotonic() + RESYNC_S
        cards = self._cards
        awaiting = sum(1 for c in cards if c.get("binding") == "awaiting decision")
        recovering = sum(  # a first launch that is blocked (binding "launch blocked") is not a recovery
            1
            for c in cards
            if c.get("continuity") == "pending"
            and c.get("binding") not in ("awaiting decision", "launch blocked")
        )
        status: dict[str, Any] = {
            "seats": len(spec.seats),
            "running": self._scope.running(),
            "recovering": recovering,
            "awaitingDecision": awaiting,
            # recovery steps waiting for the operator's observation (the pass's report names new ones)
            "held": max(sum(1 for c in cards if c.get("held")), len(set(report.held))),
            "paused": report.paused,
            "controllerEpoch": report.epoch,
            # Pods with the swarm's label but another controller-owner value (left alone)
            "foreignPods": foreign,
            "handoffs": cards,
        }
        if self._generation is not None:
            status["observedGeneration"] = self._generation
        if status != self._last_status:
            self.kube.patch(SWARMS, self.owner.namespace, self.owner.name, {"status": status}, sub="status")
            self._last_status = status
        return status


def _acted(report: PassReport) -> bool:
    """Whether the pass wrote anything a handoff card shows."""
    r = report
    return bool(r.fenced or r.decisions or r.launches or r.retired or r.refusals or r.held)


def _denied(refused: list[ApiError]) -> AccessDenied:
    """One :class:`AccessDenied` naming every distinct refused call (verb, resource, namespace)."""
    return AccessDenied(" | ".join(dict.fromkeys(describe_refusal(e) for e in refused)), refused)
