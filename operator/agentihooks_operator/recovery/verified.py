"""Which listed checkpoints really verify: the controller offers only those, never by size alone.

A listing counts a checkpoint ``complete`` from cheap checks (its record's hash, every object present
at its recorded size). An object corrupted in place at the same size passes them, and a resume
offered (or taken automatically) from it is refused by the replacement as ``corrupt_object``: a
wasted launch and a seat back to waiting. So before a checkpoint is offered, the controller hashes
it the way the worker will (:meth:`Validator.verify`, nothing staged) and remembers the answer:
committed checkpoints are immutable (write-once pointer, content-addressed objects), so one
verification per checkpoint holds for good. A store that could not be reached is remembered for
nothing (the next look tries again). A catalog that holds no objects (no store is configured, or
a test's listing) has nothing to hash, and its rows are taken as listed.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict

from agentihooks_checkpoint.catalog import CheckpointCatalog, CheckpointSummary
from agentihooks_checkpoint.reasons import Reason
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores.base import CheckpointStore
from agentihooks_checkpoint.validator import Validator

log = logging.getLogger(__name__)

#: Verifications remembered per process (oldest forgotten first).
REMEMBERED = 4096


class Verifications:
    """Remembered hash verifications of the checkpoints of one catalog."""

    def __init__(self, catalog: CheckpointCatalog, validator: Validator | None = None) -> None:
        self.store = catalog if isinstance(catalog, CheckpointStore) else None
        self.validator = validator or Validator()
        self._known: OrderedDict[tuple[str | None, str, str, int, str], bool] = OrderedDict()
        self._lock = threading.Lock()
        #: Verifications run (not answered from memory): what the benchmarks and tests count.
        self.runs = 0

    def verified(self, scope: StoreScope, checkpoint: CheckpointSummary) -> bool:
        """Whether every object of ``checkpoint`` hashes to its record (verified once, remembered)."""
        if self.store is None:
            return True
        key = (scope.namespace, scope.swarm, scope.task_id, scope.task_generation, checkpoint.checkpoint_id)
        with self._lock:
            if key in self._known:
                self._known.move_to_end(key)
                return self._known[key]
        verdict = self.validator.verify(
            self.store,
            scope,
            checkpoint.checkpoint_id,
            execution_id=checkpoint.execution_id,
            execution_generation=checkpoint.execution_generation,
        )
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
        with self._lock:
            self._known[key] = ok
            while len(self._known) > REMEMBERED:
                self._known.popitem(last=False)
        return ok
