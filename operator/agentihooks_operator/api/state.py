"""What every route handler shares, and the read-only lookups they make in Redis.

Lookups read the recovery core's records through its key names and record
models; every write goes through :class:`~..recovery.Recovery`.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import redis
from agentihooks_checkpoint.catalog import CheckpointCatalog, EmptyCatalog
from agentihooks_checkpoint.stores.base import CheckpointStore

from ..instruments import OperatorMetrics
from ..recovery.store.records import AttemptRecord, ControlOwner, DecisionRecord, FenceRecord
from .access.peers import LoopbackPeers, Peers
from .access.quotas import Quotas
from .errors import unknown_swarm
from .registry import SwarmEntry, SwarmRegistry


def _true() -> bool:
    return True


@dataclass
class ApiState:
    registry: SwarmRegistry
    redis: redis.Redis
    operator_hash: str | None = None
    #: Lists checkpoints for ``.../checkpoints`` (the controller's catalog).
    catalog: CheckpointCatalog = field(default_factory=EmptyCatalog)
    #: Backs the scoped checkpoint routes; ``None`` answers them with 503.
    store: CheckpointStore | None = None
    object_cap: int = 2 * 1024**3
    #: Where uploads are spooled (mode 0600) before they are stored; ``None``: the system temp folder.
    spool_dir: str | None = None
    #: An upload must send this many bytes per second over every window of ``upload_grace`` seconds
    #: (else 408 ``upload_too_slow``): a trickle cannot hold its share of the spool for long.
    upload_min_rate: float = 64 * 1024
    upload_grace: float = 10.0
    events_poll_seconds: float = 1.0
    #: Per-credential shares of event streams and uploads, and the shared upload spool
    #: (:mod:`.access.quotas`).
    quotas: Quotas = field(default_factory=Quotas)
    #: Whether kopf has started and is not stopping.
    kopf_ready: Callable[[], bool] = _true
    #: The recovery core's Redis key root (finds workers of swarms not published yet).
    key_prefix: str = "agentihooks"
    #: Seconds a scan for swarms' credential hashes is reused (bounds the cost of unknown callers).
    rescan_seconds: float = 1.0
    #: This process's own Prometheus instruments (the operator shares its instance with the API).
    metrics: OperatorMetrics = field(default_factory=OperatorMetrics)
    #: Which advertised addresses are really the other replicas' (:mod:`.access.peers`): forwarding
    #: contacts no other.
    peers: Peers = field(default_factory=LoopbackPeers)
    _scan_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _known_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _known: tuple[float, frozenset[bytes]] = field(
        default=(float("-inf"), frozenset()), init=False, repr=False
    )
    _scanned: tuple[float, tuple[bytes, ...]] = field(default=(float("-inf"), ()), init=False, repr=False)
    _records_scanned: tuple[float, tuple[bytes, ...]] = field(
        default=(float("-inf"), ()), init=False, repr=False
    )

    def entry(self, swarm: str, namespace: str | None = None) -> SwarmEntry:
        """The published swarm ``namespace/swarm`` (or the one namespace holding ``swarm``), else 404;
        a name several namespaces hold is refused 409 ``ambiguous_swarm``, naming them."""
        found = self.registry.get(swarm, namespace)
        if found is None:
            raise unknown_swarm()
        return found

    def find_execution(self, execution_id: str) -> tuple[SwarmEntry, AttemptRecord] | None:
        """The swarm an execution belongs to and its attempt record (blocking)."""
        for entry in self.registry.entries():
            raw = self.redis.hget(entry.recovery.keys.attempt_records, execution_id)
            if raw:
                return entry, AttemptRecord.model_validate_json(raw)
        return None

    def _credential_keys(self) -> tuple[bytes, ...]:
        """Every swarm's ``worker-credentials`` key in Redis (a SCAN, reused for ``rescan_seconds``)."""
        with self._scan_lock:
            at, keys = self._scanned
            if time.monotonic() - at < self.rescan_seconds:
                return keys
            pattern = f"{self.key_prefix}:swarm:*:worker-credentials"
            found = tuple(sorted(self.redis.scan_iter(match=pattern, count=1000, _type="HASH")))
            self._scanned = (time.monotonic(), found)
            return found

    def unpublished_execution(self, execution_id: str) -> bool:
        """True when ``execution_id`` is an attempt of a swarm this replica has not published yet
        (blocking): a replica that has just started, or has just been given the swarm. A decision
        for it is told to retry (503), never that the execution does not exist (404).

        Only ever asked after :meth:`find_execution` found nothing; its SCAN is reused for
        ``rescan_seconds``, so unknown ids cannot make this replica scan Redis more often."""
        published = {e.recovery.keys.attempt_records.encode() for e in self.registry.entries()}
        with self._scan_lock:
            at, keys = self._records_scanned
            if time.monotonic() - at >= self.rescan_seconds:
                pattern = f"{self.key_prefix}:swarm:*:attempt-records"
                keys = tuple(sorted(self.redis.scan_iter(match=pattern, count=1000, _type="HASH")))
                self._records_scanned = (time.monotonic(), keys)
        return any(key not in published and self.redis.hexists(key, execution_id) for key in keys)

    def unpublished_worker(self, execution_id: str, token: str) -> bool:
        """True when ``token`` is the live credential of ``execution_id`` in a swarm the registry has
        not published yet (blocking): such a worker is told to retry, not refused.

        A caller without that credential gets False whether the execution exists or not, so the
        answer tells a forged caller nothing.
        """
        return self.unpublished_worker_digest(execution_id, hashlib.sha256(token.encode()).hexdigest())

    def unpublished_worker_digest(self, execution_id: str, digest: str) -> bool:
        """:meth:`unpublished_worker` for the credential's sha256 hex (a forwarded request)."""
        published = {e.recovery.keys.worker_credentials.encode() for e in self.registry.entries()}
        offered = digest.encode()
        for key in self._credential_keys():
            if key in published:
                continue
            stored = self.redis.hget(key, execution_id)
            if stored is not None:
                return hmac.compare_digest(
                    offered, stored if isinstance(stored, bytes) else str(stored).encode()
                )
        return False

    def _worker_digests(self, *, fresh: bool) -> frozenset[bytes]:
        with self._known_lock:
            at, digests = self._known
            if fresh or time.monotonic() - at >= self.rescan_seconds:
                found: set[bytes] = set()
                for entry in self.registry.entries():
                    values = self.redis.hvals(entry.recovery.keys.worker_credentials)
                    found.update(v if isinstance(v, bytes) else str(v).encode() for v in values)
                digests = frozenset(found)
                self._known = (time.monotonic(), digests)
            return digests

    def known_worker(self, digest: str) -> bool:
        """True when ``digest`` is the sha256 of a live worker credential of a published swarm
        (blocking). Used only to tell an unknown token (401) from a known one without the right
        (403). Unknown digests are looked up in a set re-read at most every ``rescan_seconds``, so
        the cost of unknown callers stays bounded; a digest found there is confirmed against Redis
        at once, so a credential the fence revoked is never taken for a live one.
        """
        key = digest.encode()
        return key in self._worker_digests(fresh=False) and key in self._worker_digests(fresh=True)

    def fence(self, entry: SwarmEntry, execution_id: str) -> FenceRecord | None:
        raw = self.redis.hget(entry.recovery.keys.attempt_fences, execution_id)
        return FenceRecord.model_validate_json(raw) if raw else None

    def decision(self, entry: SwarmEntry, execution_id: str) -> DecisionRecord | None:
        raw = self.redis.hget(entry.recovery.keys.attempt_recoveries, execution_id)
        return DecisionRecord.model_validate_json(raw) if raw else None

    def handoff_of(self, entry: SwarmEntry, seat: str) -> str | None:
        """The seat's latest fenced attempt (the one a decision is about), if any."""
        raw = self.redis.hget(entry.recovery.keys.seat_handoffs, seat)
        return raw.decode() if isinstance(raw, bytes) else raw

    def current_of(self, entry: SwarmEntry, seat: str) -> AttemptRecord | None:
        raw = self.redis.hget(entry.recovery.keys.seats, seat)
        if not raw:
            return None
        eid = raw.decode() if isinstance(raw, bytes) else str(raw)
        rec = self.redis.hget(entry.recovery.keys.attempt_records, eid)
        return AttemptRecord.model_validate_json(rec) if rec else None

    def lease_held(self, entry: SwarmEntry) -> bool:
        """This process holds the swarm's lease under the epoch its Recovery acquired."""
        raw = self.redis.get(entry.recovery.keys.control_owner)
        if not raw:
            return False
        owner = ControlOwner.model_validate_json(raw)
        return owner.owner == entry.holder and owner.epoch == entry.recovery.epoch != 0
