"""One retry policy for every HTTP client of the product: the operator's Kubernetes client, the
worker's control-API and checkpoint-store client, and anything added later.

A failed call waits ``d`` drawn from ``[c/2, c]`` with ``c = min(max_delay,
base_delay * 2**(n-1))`` after its n-th failure, so clients that failed
together do not come back together; a server's ``Retry-After`` (seconds or an
HTTP date, :func:`retry_after_seconds`) is obeyed instead, up to
``retry_after_cap``. How many tries and how long in all are the caller's
(a Kubernetes call has a few seconds, a worker's restore minutes). It lives in
the checkpoint package because that is the one both the operator and the
worker may import.
"""

from __future__ import annotations

import email.utils
import random
from dataclasses import dataclass
from datetime import UTC, datetime


@dataclass(frozen=True)
class Backoff:
    base_delay: float = 0.25
    max_delay: float = 4.0
    retry_after_cap: float = 5.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after the ``attempt``-th failure (1-based); ``retry_after`` is the server's."""
        if retry_after is not None:
            return max(0.0, min(retry_after, self.retry_after_cap))
        ceiling = min(self.max_delay, self.base_delay * 2 ** (max(attempt, 1) - 1))
        return random.uniform(ceiling / 2, ceiling)


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """A ``Retry-After`` header (seconds or an HTTP date) in seconds; ``None`` when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(tz=UTC))).total_seconds())
