"""Which operator replica holds which swarm, when several run: the policy, documented in
docs/operations.md ("Several replicas").

The lease (:mod:`..recovery.lease`) already makes one replica the only writer
of a swarm; this decides *which* one, so that N replicas share the swarms and a
new replica gets its share:

* each swarm's **preferred** replica is chosen by rendezvous (highest random
  weight) hashing of the swarm's lease key and the replica id, over the live
  replicas that have **settled** (beaten for ``settle`` seconds, so a replica
  that just joined, or crash-loops, is nobody's preference yet);
* a holder keeps its swarm unless another settled replica is preferred **and**
  it has held it for ``hold`` seconds (hysteresis: a swarm moves at most once
  per ``hold``); it then releases the lease between passes, and the preferred
  replica takes it at its next renewal (a third of the lease TTL);
* a non-holder tries to take the lease when it is preferred, or when nobody has
  settled yet (a cold start: first come); otherwise it takes only a lease it
  saw **free** for a whole ``grace`` (the lease TTL), so a swarm whose
  preferred replica does not take it is never left unheld for long;
* a replica whose view of the live set is stale (Redis unreachable) behaves as
  without placement: it keeps what it holds and may take what is free.

When a replica dies, its heartbeats stop; after ``dead`` seconds the others
drop it, each of its swarms gets a new preferred replica (the others keep
theirs: rendezvous hashing moves only the dead replica's share), which takes
the lease once its TTL has run out.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import redis

from ..recovery.store.keys import SwarmKeys
from .membership import Members, Membership

log = logging.getLogger(__name__)


def weight(swarm: str, replica: str) -> int:
    """The rendezvous weight of ``replica`` for ``swarm``: the same in every process."""
    digest = hashlib.blake2b(f"{swarm}\0{replica}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def preferred(swarm: str, replicas: Iterable[str]) -> str | None:
    """The replica with the highest weight for ``swarm`` (ties by id), or ``None`` if there is none."""
    return max(replicas, key=lambda r: (weight(swarm, r), r), default=None)


@dataclass(frozen=True)
class Timing:
    """The policy's intervals, in seconds."""

    heartbeat: float
    settle: float
    dead: float
    hold: float
    grace: float

    @classmethod
    def of(cls, heartbeat: float, hold: float, lease_ms: int) -> Timing:
        """A replica is dead after three missed beats and settled after two; a free lease is taken
        by a non-preferred replica after a whole lease TTL."""
        return cls(
            heartbeat=heartbeat, settle=2 * heartbeat, dead=3 * heartbeat, hold=hold, grace=lease_ms / 1000
        )


def keep(me: str, choice: str | None, held_for: float, hold: float) -> bool:
    """Whether a holder keeps its swarm: unless another replica is preferred and ``hold`` has passed."""
    return choice is None or choice == me or held_for < hold


def take(me: str, choice: str | None, free_for: float | None, grace: float) -> bool:
    """Whether a non-holder tries the lease: preferred, nobody settled, or free (seen so) for ``grace``."""
    return choice is None or choice == me or (free_for is not None and free_for >= grace)


class Placement:
    """This replica's view of the live replicas (refreshed by a thread) and its per-swarm decisions."""

    def __init__(
        self,
        client: redis.Redis,
        prefix: str,
        operator_id: str,
        timing: Timing,
        *,
        stopping: Callable[[], bool] = lambda: False,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.me = operator_id
        self.timing = timing
        self.membership = Membership(client, prefix, operator_id, dead_ms=int(timing.dead * 1000))
        self._client, self._prefix, self._stopping, self._now = client, prefix, stopping, monotonic
        self._lock = threading.Lock()
        self._members: Members | None = None
        self._seen_at = float("-inf")
        self._held_since: dict[str, float] = {}
        self._free_since: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat_loop, name=f"placement-{operator_id}", daemon=True)

    def start(self) -> Placement:
        """Beat once now (registered before any swarm's daemon asks), then every heartbeat."""
        self.refresh()
        self._thread.start()
        return self

    def refresh(self) -> Members | None:
        try:
            members = self.membership.beat()
        except redis.RedisError as e:
            log.warning("placement: the heartbeat of %s failed: %s", self.me, e)
            return None
        with self._lock:
            self._members, self._seen_at = members, self._now()
        return members

    def _beat_loop(self) -> None:
        while not self._stop.wait(self.timing.heartbeat):
            if self._stopping():
                break
            self.refresh()
        self._leave()

    def _leave(self) -> None:
        try:
            self.membership.leave()
        except redis.RedisError as e:  # its beats stop anyway: the others drop it after ``dead``
            log.warning("placement: %s could not leave the live set: %s", self.me, e)

    def close(self) -> None:
        """Leave the live set now (a clean stop); the others re-rank at their next beat."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        else:
            self._leave()

    def choice(self, swarm: str) -> str | None:
        """The preferred replica of a lease key by the current view, ``None`` without a fresh view
        or before anybody settled."""
        with self._lock:
            members, seen_at = self._members, self._seen_at
        if members is None or self._now() - seen_at > self.timing.dead:
            return None
        return preferred(swarm, members.settled(int(self.timing.settle * 1000)))

    def mine(self, namespace: str, name: str, holding: bool) -> bool:
        """Whether this replica should hold (``holding``: keep) swarm ``name`` now; see the module."""
        key = SwarmKeys(self._prefix, name, namespace).control_owner
        choice, now = self.choice(key), self._now()
        with self._lock:
            if holding:
                self._free_since.pop(key, None)
                since = self._held_since.setdefault(key, now)
                if keep(self.me, choice, now - since, self.timing.hold):
                    return True
                del self._held_since[key]
                log.info("placement: %s/%s goes to %s (preferred)", namespace, name, choice)
                return False
            self._held_since.pop(key, None)
            if choice is None or choice == self.me:
                self._free_since.pop(key, None)
                return True
        if self._client.exists(key):  # held (by the preferred replica, normally)
            with self._lock:
                self._free_since.pop(key, None)
            return False
        with self._lock:
            free_for = now - self._free_since.setdefault(key, now)
        return take(self.me, choice, free_for, self.timing.grace)
