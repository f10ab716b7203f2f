"""The swarm's clock is Redis's: one time base for every replica, without a round trip per reading.

Every replica must agree on "now" (lease expiry, decision deadlines, held
steps), so the time base is the Redis server's ``TIME``. Asking Redis for it
before each write would add a round trip per write; instead:

* the write scripts read ``TIME`` themselves when they are given no time
  (:attr:`RedisClock.server_side` tells the writer to pass none);
* Python-side readings (a decision's deadline, an admission stamp) use the
  local monotonic clock plus an offset measured against ``TIME``, measured
  again every :data:`RESYNC_S` seconds (one round trip then, none between).
"""

from __future__ import annotations

import threading
import time

import redis

#: Seconds between two measurements of the offset to the server's clock.
RESYNC_S = 30.0


class RedisClock:
    """Milliseconds on the Redis server's clock, read locally between resyncs."""

    #: The write scripts take the time from ``TIME`` inside Redis rather than from this clock.
    server_side = True

    def __init__(self, client: redis.Redis, resync_s: float = RESYNC_S) -> None:
        self._client = client
        self._resync_s = resync_s
        self._lock = threading.Lock()
        self._offset_ms = 0.0
        self._synced_at = float("-inf")

    def _sync(self) -> None:
        before = time.monotonic()
        seconds, micros = self._client.time()
        after = time.monotonic()
        server_ms = int(seconds) * 1000 + int(micros) / 1000
        # the server read its clock somewhere in the round trip: take the middle
        self._offset_ms = server_ms - (before + after) / 2 * 1000
        self._synced_at = after

    def __call__(self) -> int:
        with self._lock:
            if time.monotonic() - self._synced_at >= self._resync_s:
                self._sync()
            return int(time.monotonic() * 1000 + self._offset_ms)
