"""A swarm's Pods as kopf's watch last showed them, so a quiet pass need not list them again.

kopf already watches the swarm's Pods (``handlers.pod_changed``); each event's
body goes to the swarm's :class:`PodCache`, which keeps the newest body per Pod
and the names that changed since the last pass took them. A pass then reads
only those (:meth:`PodCache.take`), and lists the Pods in full only as a safety
net (:meth:`PodCache.due`): before the first pass, whenever the cache may have
missed events (kopf's watch (re)started: it re-lists and sends every Pod with
event type ``None``, but a Pod deleted while it was down sends nothing; or
:meth:`invalidate`, e.g. after a new lease epoch), and every ``resync_s``.

A full list races the watch: an event that arrives while the list is in
flight may be newer than the list, so it is applied again on top of it. An
older one applied on top is corrected by the newer events that follow it on
the same ordered stream; either way the cache converges on the last event.
The cache is fed from kopf's handler threads and read by the pass's thread,
under one lock.

It also remembers the names of Pods it saw go (a ``DELETED`` event, or a Pod a
full list no longer shows), the latest :data:`GONE_KEPT` of them: positive
evidence that such a Pod was once created. A launch whose create's answer was
lost, and whose Pod someone deleted before a pass looked, reads as "absent",
which alone cannot tell "never created" from "created, then deleted"; this
evidence tells them apart, so the attempt is not launched a second time
(:meth:`was_deleted`, used by :func:`..recovery.steps.launching.launch_step`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

#: Kubernetes watch event types a cache understands (``None``: kopf's listing at a watch's start).
EVENT_TYPES = frozenset({None, "ADDED", "MODIFIED", "DELETED"})
#: How often a pass lists the Pods in full even when no event was missed.
RESYNC_S = 60.0
#: How many names of Pods seen deleted are kept (the oldest are forgotten first).
GONE_KEPT = 100_000


@dataclass(frozen=True)
class PodView:
    """What a pass reads: every cached Pod by name (never to be changed: it may be the cache's own
    map), which of them changed, and whether it is a full list."""

    pods: dict[str, dict[str, Any]]
    changed: frozenset[str]
    full: bool


class PodCache:
    """The newest body of each of one swarm's Pods, and the names changed since the last :meth:`take`."""

    def __init__(self, *, resync_s: float = RESYNC_S, clock: Callable[[], float] = time.monotonic) -> None:
        if resync_s <= 0:
            raise ValueError(f"resync_s must be positive, not {resync_s!r}")
        self._lock = threading.Lock()
        self._pods: dict[str, dict[str, Any]] = {}
        self._changed: set[str] = set()
        self._stale = True  # nothing listed yet
        self._listed_at: float | None = None
        #: Events that arrived while a full list was in flight (applied again on top of it).
        self._during: list[tuple[str | None, str, dict[str, Any]]] | None = None
        self._resync_s = resync_s
        self._clock = clock
        #: ``_pods`` was handed to a pass (:meth:`take`): the next change copies it first, so a
        #: quiet pass gets the map without a copy of 50,000 entries and a pass's map never moves.
        self._shared = False
        #: Names of Pods this cache saw exist and then go, oldest first (bounded by GONE_KEPT).
        self._gone: dict[str, None] = {}

    def was_deleted(self, name: str) -> bool:
        """Whether this cache saw Pod ``name`` exist and then go since the process started."""
        with self._lock:
            return name in self._gone

    def _went(self, names: Iterable[str]) -> None:
        for name in names:
            self._gone.pop(name, None)
            self._gone[name] = None
        while len(self._gone) > GONE_KEPT:
            del self._gone[next(iter(self._gone))]

    def feed(self, kind: str | None, body: Mapping[str, Any]) -> None:
        """Apply one watch event (``kind`` ``ADDED``/``MODIFIED``/``DELETED``, ``None`` for a listing)."""
        if kind not in EVENT_TYPES:
            raise ValueError(f"unknown watch event type {kind!r}")
        name = (body.get("metadata") or {}).get("name")
        if not isinstance(name, str) or not name:
            raise ValueError("a Pod event without metadata.name")
        plain = _plain(body)
        with self._lock:
            if kind is None:  # the watch (re)started: what it missed while down is unknown
                self._stale = True
            if self._shared:
                self._pods, self._shared = dict(self._pods), False
            if kind == "DELETED":
                self._went([name])
            _apply(self._pods, kind, name, plain)
            self._changed.add(name)
            if self._during is not None:
                self._during.append((kind, name, plain))

    def invalidate(self) -> None:
        """The next pass lists the Pods in full."""
        with self._lock:
            self._stale = True

    def due(self) -> bool:
        """Whether the next read must be a full list."""
        with self._lock:
            if self._stale or self._listed_at is None:
                return True
            return self._clock() - self._listed_at >= self._resync_s

    def begin_list(self) -> None:
        """A full list starts: events from now on are applied again on top of its result."""
        with self._lock:
            self._during = []
            self._stale = False

    def end_list(self, items: Iterable[Mapping[str, Any]]) -> PodView:
        """The listed Pods replace the cache (then the events seen meanwhile); all count as changed."""
        fresh: dict[str, dict[str, Any]] = {}
        for item in items:
            fresh[str((item.get("metadata") or {}).get("name"))] = _plain(item)
        with self._lock:
            for kind, name, body in self._during or []:
                _apply(fresh, kind, name, body)
            self._went(n for n in self._pods if n not in fresh)  # gone while the watch was away
            self._during = None
            self._pods, self._shared = fresh, True
            self._changed.clear()
            self._listed_at = self._clock()
            return PodView(fresh, frozenset(fresh), full=True)

    def abort_list(self) -> None:
        """The full list failed: the next read tries again."""
        with self._lock:
            self._during = None
            self._stale = True

    def take(self) -> PodView:
        """Every cached Pod and the names changed since the last take (deleted ones included). The
        map is shared, not copied: the caller only reads it, and the cache copies it before its next
        change (copy on write)."""
        with self._lock:
            changed, self._changed = frozenset(self._changed), set()
            self._shared = True
            return PodView(self._pods, changed, full=False)


def _apply(
    pods: MutableMapping[str, dict[str, Any]], kind: str | None, name: str, body: dict[str, Any]
) -> None:
    if kind == "DELETED":
        pods.pop(name, None)
    else:
        pods[name] = body


def _plain(body: Mapping[str, Any]) -> dict[str, Any]:
    """A plain dict of the body's top level (kopf hands read-only mapping views)."""
    return {str(k): v for k, v in body.items()}


def register(memo: MutableMapping[str, Any], namespace: str, swarm: str) -> PodCache:
    """A new cache for the swarm's pass, fed from now on by :func:`feed` (replaces an older one).

    ``memo["podcaches"]`` must exist before kopf copies the memo for each object (at start-up), so
    the Pods' handlers and the Swarm's daemon share it."""
    cache = PodCache()
    memo.setdefault("podcaches", {})[(namespace, swarm)] = cache
    return cache


def feed(memo: Mapping[str, Any], namespace: str | None, swarm: str | None, event: Mapping[str, Any]) -> None:
    """Hand one kopf Pod event (``{"type": ..., "object": ...}``) to its swarm's cache, if it has one."""
    cache = (memo.get("podcaches") or {}).get((namespace, swarm))
    body = event.get("object")
    if cache is not None and isinstance(body, Mapping) and event.get("type") in EVENT_TYPES:
        cache.feed(event.get("type"), body)
