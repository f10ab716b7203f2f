"""The one retry policy: jittered exponential waits, a server's Retry-After obeyed up to a cap, in
seconds or as an HTTP date, the same for the Kubernetes client and the worker's store client."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
from agentihooks_checkpoint.retry import Backoff, retry_after_seconds
from agentihooks_checkpoint.stores import remote
from agentihooks_operator.k8s.client import Retries


def test_waits_grow_with_jitter_up_to_the_cap() -> None:
    b = Backoff(base_delay=0.25, max_delay=2.0)
    for attempt, ceiling in ((1, 0.25), (2, 0.5), (3, 1.0), (4, 2.0), (9, 2.0)):
        waits = {b.delay(attempt) for _ in range(200)}
        assert all(ceiling / 2 <= w <= ceiling for w in waits)
        assert len(waits) > 1  # jittered: replicas that failed together do not return together


def test_retry_after_is_obeyed_up_to_its_cap() -> None:
    b = Backoff(retry_after_cap=5.0)
    assert b.delay(1, 3.0) == 3.0 and b.delay(1, 60.0) == 5.0 and b.delay(1, -1.0) == 0.0


def test_retry_after_in_seconds_or_as_an_http_date() -> None:
    now = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    assert retry_after_seconds("2") == 2.0
    assert retry_after_seconds(format_datetime(now + timedelta(seconds=9), usegmt=True), now=now) == 9.0
    assert retry_after_seconds("later") is None and retry_after_seconds(None) is None


def test_both_clients_wait_the_same_way() -> None:
    """The store client read only a number of seconds before (an HTTP date was ignored); the
    Kubernetes client read both. Now the same function reads them for both."""
    when = format_datetime(datetime.now(tz=UTC) + timedelta(seconds=3), usegmt=True)
    resp = httpx.Response(503, headers={"Retry-After": when})
    got = remote._retry_after(resp)
    assert got is not None and 1.5 <= got <= 3.0
    slept: list[float] = []
    backoff = remote._Backoff(60.0, None, slept.append)
    assert backoff.wait(2.0) and slept == [2.0]
    assert Retries().delay(1, 2.0) == 2.0
    assert Retries(retry_after_cap=1.0).delay(1, 2.0) == backoff.policy.delay(1, 1.0) == 1.0
