"""Which listed checkpoints really verify *now*: the controller offers only those, never by size alone.

A listing counts a checkpoint ``complete`` from cheap checks (its record's hash, every object present
at its recorded size). An object corrupted in place at the same size passes them, and a resume
offered (or taken automatically) from it is refused by the replacement as ``corrupt_object``: a
wasted launch and a seat back to waiting. So before a checkpoint is offered, the controller hashes
it the way the worker will (:meth:`Validator.verify`, nothing staged).

A verdict is remembered with the identity the store gives each object it read (a local file's
device, inode, size and change time; an S3 object's ETag, version and time), read *before* the
hashing, so a change during it shows next time. A later look re-reads only those identities (a stat
or a HEAD per object) and hashes again when any of them moved, or when the store gives none (then
every look hashes). Committed checkpoints are meant to be immutable, but a store is not: an object
overwritten after it verified (a faulty disk, a bad restore from backup, a hostile writer) is caught
at the next offer, not trusted for good. A store that could not be reached is remembered for nothing
(the next look tries again). A catalog that holds no objects (no store is configured, or a test's
listing) has nothing to hash, and its rows are taken as listed.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass

from agentihooks_checkpoint.catalog import CheckpointCatalog, CheckpointSummary
from agentihooks_checkpoint.errors import StoreError
from agentihooks_checkpoint.reasons import Reason
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores.base import CheckpointStore
from agentihooks_checkpoint.validator import Validator

log = logging.getLogger(__name__)

#: Verifications remembered per process (oldest forgotten first).
REMEMBERED = 4096


class Verifications:
    """Remembered hash verifications of the checkpoints of one catalog, re-checked at each look."""

    def __init__(self, catalog: CheckpointCatalog, validator: Validator | None = None) -> None:
        self.store = catalog if isinstance(catalog, CheckpointStore) else None
        self.validator = validator or Validator()
        self._known: OrderedDict[tuple[str | None, str, str, int, str], _Known] = OrderedDict()
        self._lock = threading.Lock()
        #: Verifications run (not answered from memory): what the benchmarks and tests count.
        self.runs = 0
        #: Looks answered by the identity check alone (no object read).
        self.rechecks = 0

    def verified(self, scope: StoreScope, checkpoint: CheckpointSummary) -> bool:
        """Whether every object of ``checkpoint`` hashes to its record, as the store holds it now."""
        if self.store is None:
            return True
        key = (scope.namespace, scope.swarm, scope.task_id, scope.task_generation, checkpoint.checkpoint_id)
        with self._lock:
            known = self._known.get(key)
            if known is not None:
                self._known.move_to_end(key)
        if known is not None and self._unchanged(scope, known):
            with self._lock:
                self.rechecks += 1
            return known.ok
        store = self.store
        keys = self.validator.listed_keys(store, scope, checkpoint.checkpoint_id)
        seen = self._identities(scope, keys) if keys is not None else None
        verdict = self.validator.verify(
            store,
            scope,
            checkpoint.checkpoint_id,
            execution_id=checkpoint.execution_id,
            execution_generation=checkpoint.execution_generation,
        )
        with self._lock:
            self.runs += 1
        if verdict.reason == Reason.STORE_UNREACHABLE:
            return False  # nothing is known: asked again next time
        ok = verdict.reason is None
        if not ok:
            log.warning(
                "checkpoint %s of task %s does not verify (%s): it is not offered",
                checkpoint.checkpoint_id,
                scope.task_id,
                verdict.reason.value if verdict.reason else "",
            )
        elif known is not None and not known.ok:
            log.info("checkpoint %s of task %s verifies again", checkpoint.checkpoint_id, scope.task_id)
        with self._lock:
            self._known[key] = _Known(ok, seen)
            while len(self._known) > REMEMBERED:
                self._known.popitem(last=False)
        return ok

    def forget(self, scope: StoreScope, checkpoint_id: str) -> None:
        """Drop what is remembered of ``checkpoint_id`` (a worker found it damaged): hashed again next."""
        key = (scope.namespace, scope.swarm, scope.task_id, scope.task_generation, checkpoint_id)
        with self._lock:
            self._known.pop(key, None)

    def _identities(self, scope: StoreScope, keys: list[str]) -> dict[str, str] | None:
        """Each key's identity, or ``None`` when the store cannot give one for every key."""
        assert self.store is not None
        out: dict[str, str] = {}
        try:
            for k in keys:
                ident = self.store.identity(scope, k)
                if ident is None:
                    return None
                out[k] = ident
        except StoreError:
            return None
        return out

    def _unchanged(self, scope: StoreScope, known: _Known) -> bool:
        if known.identities is None:
            return False  # nothing cheap to compare: hash again
        now = self._identities(scope, list(known.identities))
        return now == known.identities


@dataclass(frozen=True)
class _Known:
    ok: bool
    #: Each stored key's identity when it was read for the verdict (``None``: the store gives none).
    identities: dict[str, str] | None
