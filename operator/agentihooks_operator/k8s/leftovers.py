"""What a retired attempt leaves behind (its credential Secret and launch ConfigMap), noted durably.

Only the fenced Pod has to go before the replacement is launched: the fence
already revoked the worker credential in Redis, so the Secret grants nothing
and the ConfigMap is only a record. Deleting them on the failover's critical
path cost two API requests, so ``retire`` notes the attempt here (before the
Pod delete) and the pass deletes the two objects after its launches. The note
lives in Redis, in the swarm's ``retire-leftovers`` set, and is removed only
once both deletes succeeded: an operator that dies in between leaves it for
the next pass (of any replica), and a repeated delete of an absent object is
harmless, so leftovers are neither leaked nor cleaned twice.
"""

from __future__ import annotations

import threading
from typing import Protocol

import redis

from ..recovery.store.keys import SwarmKeys


def leftovers_key(keys: SwarmKeys) -> str:
    """The swarm's set of retired attempts whose Secret and ConfigMap may still exist."""
    return keys.retire_leftovers


class Leftovers(Protocol):
    def note(self, execution_id: str) -> None: ...

    def pending(self) -> list[str]: ...

    def done(self, execution_ids: list[str]) -> None: ...


class RedisLeftovers:
    """The durable ledger the operator uses: one Redis set per swarm."""

    def __init__(self, client: redis.Redis, keys: SwarmKeys) -> None:
        self._redis = client
        self.key = leftovers_key(keys)

    def note(self, execution_id: str) -> None:
        self._redis.sadd(self.key, execution_id)

    def pending(self) -> list[str]:
        return sorted(m.decode() if isinstance(m, bytes) else str(m) for m in self._redis.smembers(self.key))

    def done(self, execution_ids: list[str]) -> None:
        if execution_ids:
            self._redis.srem(self.key, *execution_ids)


class MemoryLeftovers:
    """A ledger kept in this process only (a launcher built without Redis, as in unit tests)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: set[str] = set()

    def note(self, execution_id: str) -> None:
        with self._lock:
            self._ids.add(execution_id)

    def pending(self) -> list[str]:
        with self._lock:
            return sorted(self._ids)

    def done(self, execution_ids: list[str]) -> None:
        with self._lock:
            self._ids.difference_update(execution_ids)
