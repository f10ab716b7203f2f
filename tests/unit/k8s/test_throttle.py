"""The recovery client's client-side limits (k8s/throttle.py): a token bucket on a fake clock, and the
settings that reach the client."""

from __future__ import annotations

import pytest
from agentihooks_operator.k8s.config import OperatorConfig
from agentihooks_operator.k8s.throttle import ClientLimits, TokenBucket, bucket_for


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 6))
        self.now += seconds


def test_a_burst_is_served_at_once_then_callers_queue_at_the_rate() -> None:
    t = FakeTime()
    bucket = TokenBucket(10, 3, clock=t.clock, sleep=t.sleep)
    waits = [bucket.take() for _ in range(3)]
    assert waits == [0, 0, 0] and t.slept == []
    bucket.take()
    bucket.take()
    assert t.slept == [0.1, 0.1]  # each caller waits one token's time after the one before it


def test_tokens_saved_while_idle_never_exceed_the_burst() -> None:
    t = FakeTime()
    bucket = TokenBucket(10, 2, clock=t.clock, sleep=t.sleep)
    t.now += 60  # a minute idle: still only two saved
    for _ in range(3):
        bucket.take()
    assert t.slept == [0.1]
    assert bucket.waited == pytest.approx(0.1)


def test_concurrent_callers_reserve_in_order() -> None:
    """Callers that arrive together each reserve the next token: the waits grow, none is shared."""
    t = FakeTime()
    bucket = TokenBucket(4, 1, clock=t.clock, sleep=lambda s: t.slept.append(round(s, 6)))  # no time passes
    for _ in range(4):
        bucket.take()
    assert t.slept == [0.25, 0.5, 0.75]


def test_no_rate_means_no_bucket_and_the_burst_defaults_to_twice_the_rate() -> None:
    assert bucket_for(None) is None and bucket_for(ClientLimits()) is None
    bucket = bucket_for(ClientLimits(qps=5))
    assert bucket is not None and (bucket.rate, bucket.capacity) == (5, 10)
    bucket = bucket_for(ClientLimits(qps=0.2))
    assert bucket is not None and bucket.capacity == 1
    bucket = bucket_for(ClientLimits(qps=50, burst=7))
    assert bucket is not None and bucket.capacity == 7


@pytest.mark.parametrize(
    ("limits", "message"),
    [({"qps": -1}, "negative"), ({"burst": -1}, "negative"), ({"connections": 0}, "at least 1")],
)
def test_unusable_limits_are_refused_by_name(limits: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ClientLimits(**limits)  # type: ignore[arg-type]


def test_the_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    config = OperatorConfig()
    assert (config.kube_qps, config.kube_burst, config.kube_connections) == (0, 0, 64)
    monkeypatch.setenv("AGENTIHOOKS_KUBE_QPS", "50")
    monkeypatch.setenv("AGENTIHOOKS_KUBE_BURST", "100")
    monkeypatch.setenv("AGENTIHOOKS_KUBE_CONNECTIONS", "16")
    config = OperatorConfig()
    assert (config.kube_qps, config.kube_burst, config.kube_connections) == (50, 100, 16)
    monkeypatch.setenv("AGENTIHOOKS_KUBE_CONNECTIONS", "0")
    with pytest.raises(ValueError, match="kube_connections"):
        OperatorConfig()
