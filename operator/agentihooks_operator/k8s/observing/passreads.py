"""The read side of a swarm's pass: its Pods from the watch-fed cache, its Nodes, what is foreign.

A pass reads the swarm's Pods from :class:`.podcache.PodCache` (fed by kopf's
Pod events), and lists them only when the cache says a full list is due; an
attempt whose Pod the cache lacks is read by name first (the watch may not
have delivered a Pod created a moment ago). An attempt still observed ``gone`` is checked once
more before the core may fence it (:meth:`PassReads._recheck_gone`): its launch may have been
finished by another thread (an API decision) after the Pods were read. The Nodes are listed every
quarter of ``node_lost_after_s`` (at most every 10 s, :func:`.scope.node_period`)
and again when a changed Pod is bound to a Node the last list lacks; the Nodes
that changed, vanished or are not Ready are kept in ``_touched`` so the pass
observes their Pods again (:mod:`.scope`).

:class:`PassReads` is a part of :class:`.swarmpass.SwarmPass` (its methods are
the pass's, so a test can wrap ``_pods`` or ``_nodes`` of one pass).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import redis

from ...recovery.models import AttemptObservation
from ...recovery.store.keys import SwarmKeys
from ...recovery.store.records import AttemptRecord
from ..building.pods import Owner, label, owned_by, pod_name
from ..client import KubeClient
from ..errors import ApiError
from ..scope import Scope, node_period, not_ready, touched_nodes
from .observe import split_foreign
from .podcache import PodCache, PodView

log = logging.getLogger(__name__)
#: Pods missing from the cache a pass reads one by one before it lists them all instead.
CONFIRM_MAX = 10


class PassReads:
    """The reads of one swarm's passes, and what they remember between passes."""

    kube: KubeClient
    owner: Owner

    def _init_reads(
        self,
        redis_client: redis.Redis,
        keys: SwarmKeys,
        node_lost_after_s: float,
        pod_cache: PodCache | None,
    ) -> None:
        self._nodes_allowed = True
        self._redis = redis_client
        self._work_key = keys.recovery_work
        #: The swarm's Pods as the watch shows them (``None``: every pass lists them, see :mod:`.podcache`).
        self._cache = pod_cache
        #: Which attempts an incremental pass observes (:mod:`.scope`).
        self._scope = Scope(redis_client, keys)
        self._epoch_seen = 0
        #: The last Node list, when the next one is due, and the Nodes a pass re-observes Pods on.
        self._node_view: dict[str, dict[str, Any]] | None = None
        self._nodes_due = 0.0
        self._node_every_s = node_period(node_lost_after_s)
        self._touched: set[str] = set()
        self._foreign: dict[str, Any] = {}

    def _list_pods(self) -> list[dict[str, Any]]:
        return self.kube.list("pods", self.owner.namespace, {label("swarm"): self.owner.name})

    def _pods(self) -> PodView:
        """This pass's Pods: the watch-fed cache, listed in full when due (:mod:`.podcache`)."""
        cache = self._cache
        if cache is None:
            items = self._list_pods()
            pods = {str(p["metadata"]["name"]): p for p in items}
            return PodView(pods, frozenset(pods), full=True)
        if not cache.due():
            return cache.take()
        cache.begin_list()
        try:
            items = self._list_pods()
        except BaseException:
            cache.abort_list()
            raise
        return cache.end_list(items)

    def _list_nodes(self) -> dict[str, dict[str, Any]] | None:
        if not self._nodes_allowed:
            return None
        try:
            items = self.kube.list("nodes", None)
        except ApiError as e:
            if e.status in (403, 404):
                log.warning("nodes cannot be listed (%s); node loss is read from Pod status only", e.status)
                self._nodes_allowed = False
                return None
            raise
        return {str(n["metadata"]["name"]): n for n in items}

    def _nodes(self) -> dict[str, dict[str, Any]] | None:
        """This pass's Nodes: listed every node period (a quarter of ``node_lost_after_s``, at most
        10 s) and after a new lease epoch, else the last list; sets the Nodes whose Pods are
        observed again (changed, vanished or not Ready: :func:`.scope.touched_nodes`)."""
        if self._node_view is None or time.monotonic() >= self._nodes_due:
            self._note_nodes(self._list_nodes())
        else:
            self._touched = touched_nodes(self._node_view, self._node_view)
        return self._node_view

    def _note_nodes(self, listed: dict[str, dict[str, Any]] | None) -> None:
        self._touched = touched_nodes(self._node_view, listed) if listed is not None else set()
        self._node_view = listed
        self._nodes_due = time.monotonic() + self._node_every_s

    def _nodes_of(
        self, pods: Mapping[str, Mapping[str, Any]], nodes: dict[str, dict[str, Any]] | None
    ) -> dict[str, dict[str, Any]] | None:
        """The Nodes, listed again when a Pod is bound to one the list lacks or shows not Ready.

        The Nodes are listed beside the Pods, not after them (and between full passes only every
        node period): a Node that joined, or came back Ready, and got a Pod bound to it after that
        list would look deleted or still lost, and its healthy new Pod lost with it (a real kubelet
        back after an outage: the scheduler binds the replacement the moment the Node is Ready).
        Only a Node missing, or not Ready, in a list taken after the Pods' is trusted. ``pods`` are
        the Pods read this pass (all of them on a full pass, the changed ones otherwise).
        """
        if nodes is None:
            return None
        bound = {str((p.get("spec") or {}).get("nodeName") or "") for p in pods.values()} - {""}
        if not any(n not in nodes or not_ready(nodes[n]) for n in bound):
            return nodes
        touched = self._touched
        self._note_nodes(self._list_nodes())
        self._touched |= touched
        return self._node_view

    def _confirm_absent(self, view: PodView, attempts: list[AttemptRecord]) -> PodView | None:
        """The view with the Pods the cache lacks for ``attempts`` read one by one: the watch may not
        have delivered a Pod created a moment ago (say, by the last pass), and a Pod that is not there
        is lost. ``None`` when more than ``CONFIRM_MAX`` are missing (a full list is cheaper then)."""
        names = [pod_name(a.execution_id) for a in attempts if pod_name(a.execution_id) not in view.pods]
        if len(names) > CONFIRM_MAX:
            return None
        found = self._read_by_name(names)
        if not found:
            return view
        return PodView({**view.pods, **found}, view.changed | found.keys(), full=False)

    def _recheck_gone(
        self,
        attempts: list[AttemptRecord],
        observations: list[AttemptObservation],
        observe_again: Callable[[list[AttemptRecord], dict[str, Any]], list[AttemptObservation]],
    ) -> list[AttemptObservation]:
        """The observations with each ``gone`` one checked again, journal first, then the Pod.

        The Pods were read before this; the core reads the journal after it and fences a ``gone``
        attempt whose launch is no longer in flight. A launch another thread (an API decision)
        finished in between would look lost: its Pod was created after the read. So the journal
        is read first here: an attempt still launching is ``pending`` this pass (the journal
        resolves it); for the others the Pod is read by name, now that their launch is over, and
        a Pod found is observed as it is. Costs nothing while no attempt is ``gone``.
        """
        gone = [o.execution_id for o in observations if o.state == "gone"]
        if not gone:
            return observations
        work = self._redis.hmget(self._work_key, gone)
        launching = {e for e, v in zip(gone, work, strict=True) if v in (b"launch", "launch")}
        found = self._read_by_name([pod_name(e) for e in gone if e not in launching])
        again: dict[str, AttemptObservation] = {}
        if found:
            chosen = [a for a in attempts if pod_name(a.execution_id) in found]
            again = {o.execution_id: o for o in observe_again(chosen, found)}
        out: list[AttemptObservation] = []
        for o in observations:
            if o.execution_id in launching:
                log.debug("attempt %s of %s is still launching: not lost", o.execution_id, self.owner.name)
                out.append(o.model_copy(update={"state": "pending", "reason": None}))
            else:
                out.append(again.get(o.execution_id, o))
        return out

    def _read_by_name(self, names: list[str]) -> dict[str, dict[str, Any]]:
        """The Pods of ``names`` that exist, read one by one and fed to the cache."""
        found: dict[str, dict[str, Any]] = {}
        for name in names:
            pod = self.kube.get("pods", self.owner.namespace, name)
            if pod is not None:
                found[name] = pod
                if self._cache is not None:
                    self._cache.feed("MODIFIED", pod)
        return found

    def _split(self, view: PodView) -> dict[str, Any]:
        """The foreign Pods (another controller's), kept up to date from the changed ones."""
        if view.full:
            self._foreign = dict(split_foreign(view.pods, self.owner.name)[1])
            return self._foreign
        for name in view.changed:
            pod = view.pods.get(name)
            if pod is not None and not owned_by(pod, self.owner.name):
                self._foreign[name] = pod
            else:
                self._foreign.pop(name, None)
        return self._foreign

    def _resync(self) -> None:
        """The next reads list the Pods and the Nodes in full."""
        if self._cache is not None:
            self._cache.invalidate()
        self._nodes_due = 0.0
