"""What every step needs: the writer, the checkpoint catalog, the launcher and the fault hook."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from agentihooks_checkpoint.catalog import CheckpointCatalog, CheckpointSummary
from agentihooks_checkpoint.scope import StoreScope

from ..swarm import SwarmSpec
from .launcher import FaultInjector, ReplacementLauncher
from .policy import usable_checkpoints
from .steps.broker import AccountBroker, BrokerSource, HttpBrokers
from .steps.launchwait import LaunchWaits
from .store.writer import Writer
from .verified import Verifications


def new_execution_id() -> str:
    return f"exe-{uuid.uuid4().hex}"


def new_grant_id() -> str:
    return f"grant-{uuid.uuid4().hex[:24]}"


@dataclass
class Ctx:
    w: Writer
    catalog: CheckpointCatalog
    launcher: ReplacementLauncher
    faults: FaultInjector
    clock: Callable[[], int] | None = None
    #: Builds a swarm's external account broker; only used when its spec names one.
    brokers: BrokerSource = field(default_factory=HttpBrokers)
    _locks: dict[str, threading.Lock] = field(default_factory=dict)
    _guard: threading.Lock = field(default_factory=threading.Lock)
    #: Blocked launches waiting out their backoff, and the digest of the spec they were refused under.
    waits: LaunchWaits = field(default_factory=LaunchWaits)
    spec_key: str = ""
    #: Hash verifications of the catalog's checkpoints (only verified ones are offered).
    verifications: Verifications | None = None

    def __post_init__(self) -> None:
        if self.verifications is None:
            self.verifications = Verifications(self.catalog)

    def follow(self, spec: SwarmSpec) -> None:
        """The spec this controller works under now: blocked launches wait by its pace and end their
        wait when it changes."""
        self.spec_key = spec.fingerprint
        self.waits.follow(spec)

    def lock_for(self, execution_id: str) -> threading.Lock:
        """One lock per attempt, so an API thread and the pass never launch the same attempt at once."""
        with self._guard:
            if len(self._locks) > 10000:
                self._locks = {k: v for k, v in self._locks.items() if v.locked()}
            return self._locks.setdefault(execution_id, threading.Lock())

    def broker(self, spec: SwarmSpec | None) -> AccountBroker | None:
        """The swarm's external account broker, or ``None`` for the built-in pool in Redis."""
        if spec is None or spec.account_broker is None:
            return None
        return self.brokers(spec.account_broker)

    @property
    def swarm(self) -> str:
        return self.w.keys.swarm

    @property
    def label(self) -> str:
        """``<namespace>/<name>``: how log lines name the swarm."""
        return self.w.keys.label

    def point(self, name: str) -> None:
        """A named write point (``before:<step>``/``after:<step>``): the fault hook may raise here."""
        self.faults(name)

    def now_ms(self) -> int:
        return int(self.clock()) if self.clock is not None else int(time.time() * 1000)

    def checkpoint(
        self,
        execution_id: str,
        task_id: str,
        task_generation: int,
        compatibility_key: str,
        *,
        restored_from: str | None = None,
        namespace: str | None = None,
    ) -> CheckpointSummary | None:
        """The newest complete checkpoint of the attempt compatible with ``compatibility_key`` whose
        objects verified (a newer one that does not verify is passed over, never offered).

        The lookup follows the seat's lineage: an attempt that captured none of its own (a replacement
        that died before its first capture) offers the checkpoint of the attempt it restored from
        (``restored_from``), the one its own directive named, which it would restore again.
        """
        scope = StoreScope(
            swarm=self.swarm, task_id=task_id, task_generation=task_generation, namespace=namespace
        )
        listed = self.catalog.list_checkpoints(scope, execution_id=execution_id)
        found = self._verified(scope, usable_checkpoints(listed, compatibility_key))
        if found is None and restored_from is not None and restored_from != execution_id:
            earlier = self.catalog.list_checkpoints(scope, execution_id=restored_from)
            found = self._verified(scope, usable_checkpoints(earlier, compatibility_key))
        return found

    def _verified(self, scope: StoreScope, candidates: list[CheckpointSummary]) -> CheckpointSummary | None:
        """The newest of ``candidates`` whose objects hash to its record (:mod:`.verified`)."""
        assert self.verifications is not None
        return next((c for c in candidates if self.verifications.verified(scope, c)), None)
