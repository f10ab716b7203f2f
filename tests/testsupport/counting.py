"""Counting Redis round trips at the connection, independently of the recovery core's own counter.

Tests that bound the round trips of a pass or an admission need a count the code under test cannot
get wrong: one per command or pipeline actually sent, from any thread (a pass fans attempts out).
"""

from __future__ import annotations

import threading
from typing import Any

import redis


class CountingConnection(redis.Connection):
    """Counts every command or pipeline sent (class-wide, thread-safe)."""

    sent = 0
    _lock = threading.Lock()

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        with CountingConnection._lock:
            CountingConnection.sent += 1
        super().send_packed_command(command, check_health)


def counted(redis_url: str) -> redis.Redis:
    """A client whose every connection counts into :attr:`CountingConnection.sent`."""
    pool = redis.ConnectionPool.from_url(redis_url, connection_class=CountingConnection)
    return redis.Redis(connection_pool=pool)


def warm_pool(client: redis.Redis, connections: int) -> None:
    """Open ``connections`` pooled connections now, as a warm controller has them: each new
    connection's handshake (HELLO, CLIENT SETINFO, ...) is paid once per process, not per pass."""
    pool = client.connection_pool
    conns = [pool.get_connection() for _ in range(connections)]
    for c in conns:
        pool.release(c)
