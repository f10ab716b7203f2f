"""How long a blocked launch waits before it is tried again.

A launch the launcher cannot send (:class:`~..errors.LaunchBlocked`: the API
server refused the Pod, a credential Secret is missing, RBAC denies a create)
stays ``unknown`` in the journal, and a later pass observes it and sends it
again. Sent again on every pass, a seat blocked by a quota would cost two reads
and two writes on the API server every few seconds (and every pass a Pod event
wakes), for as long as nobody fixes the quota. So each blocked attempt waits
between tries, with the product's one backoff (:class:`Backoff`): the first
retry after about one pass interval (``base``), doubling up to twelve of them
(``cap``: a minute at the default 5 s), jittered so that seats blocked together
do not come back together.

The wait is this process's own and measured on its monotonic clock: a replica
with a skewed wall clock (or one that took the lease over from another) never
waits longer than ``cap``; a replica that takes the lease over tries once at its
first pass, then backs off again. A change of the Swarm's spec (a fixed Pod
template, a new image) ends every wait at once: the next pass tries right away.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from agentihooks_checkpoint.retry import Backoff

from ...swarm import SwarmSpec

#: Defaults (the default pass interval of 5 s): retried after about 5 s, then 10, 20... to a minute.
BASE_S = 5.0
CAP_S = 60.0
#: The longest wait, in pass intervals.
CAP_INTERVALS = 12


@dataclass
class _Wait:
    tries: int
    until: float
    spec: str


@dataclass
class LaunchWaits:
    """Attempt → when its blocked launch may be tried again (on ``clock``, seconds)."""

    base: float = BASE_S
    cap: float = CAP_S
    clock: Callable[[], float] = time.monotonic
    _waits: dict[str, _Wait] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def follow(self, spec: SwarmSpec) -> None:
        """Take the wait's pace from ``spec``'s pass interval."""
        self.base = spec.recovery.pass_interval_seconds
        self.cap = CAP_INTERVALS * self.base

    def blocked(self, execution_id: str, spec: str, *, grow: bool = True) -> float:
        """Note one more refused try of ``execution_id``'s launch; returns the seconds it now waits.

        ``grow=False`` (the API server was unreachable: nobody has to fix anything, it comes back by
        itself) keeps the wait at about one pass interval, so the launch goes out soon after it is back.
        """
        with self._lock:
            prev = self._waits.get(execution_id)
            tries = prev.tries + 1 if prev is not None else 1
            delay = Backoff(self.base, self.cap).delay(tries if grow else 1)
            self._waits[execution_id] = _Wait(tries, self.clock() + delay, spec)
            self._prune()
            return delay

    def hold(self, execution_id: str, spec: str, seconds: float) -> None:
        """Wait exactly ``seconds`` (a known end, such as the old attempt's lease): no backoff."""
        with self._lock:
            prev = self._waits.get(execution_id)
            tries = prev.tries if prev is not None else 0
            self._waits[execution_id] = _Wait(tries, self.clock() + max(0.0, seconds), spec)
            self._prune()

    def waiting(self, execution_id: str, spec: str) -> bool:
        """Whether ``execution_id``'s launch is still waiting out its backoff under ``spec``."""
        with self._lock:
            wait = self._waits.get(execution_id)
            if wait is None:
                return False
            if wait.spec != spec:  # the Swarm changed: whatever blocked it may be fixed
                wait.until = 0.0
                return False
            return self.clock() < wait.until

    def tries(self, execution_id: str) -> int:
        with self._lock:
            wait = self._waits.get(execution_id)
            return wait.tries if wait is not None else 0

    def done(self, execution_id: str) -> None:
        """The launch went out (or was found made, or dropped): forget its wait."""
        with self._lock:
            self._waits.pop(execution_id, None)

    def _prune(self) -> None:
        # Attempts that ended another way (retired, superseded) leave their entry behind: drop those
        # whose wait ran out long ago, so the map stays bounded by the attempts blocked lately.
        if len(self._waits) > 4096:
            stale = self.clock() - 4 * self.cap
            self._waits = {k: w for k, w in self._waits.items() if w.until > stale}
