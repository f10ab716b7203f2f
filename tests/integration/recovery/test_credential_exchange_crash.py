"""A controller killed around the credential exchange's one write: the trade happens once or not at all.

Real Redis. Killed before the write: nothing changed, the Pod's credential still trades. Killed
after it (the answer never reached the worker): the Pod's credential is spent and the new one was
never handed out, so the attempt holds no credential at all; nothing else changed (its seat, its
records), a second trade is refused, and the fence recovers the seat like any failed attempt.
"""

from __future__ import annotations

import hashlib

import pytest
from agentihooks_operator.recovery import CrashAt, InjectedFault, RecoveryRefused
from testsupport.recovery import observe


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def test_killed_before_the_write_the_pods_credential_still_trades(make, spec, launcher) -> None:  # type: ignore[no-untyped-def]
    plan = make().ensure_seats(spec)[0]
    pods = plan.worker_token.get_secret_value()
    with pytest.raises(InjectedFault):
        make(faults=CrashAt("before:exchange")).exchange_worker_credential(plan.execution_id, digest(pods))
    r = make()
    assert r.check_worker_credential(plan.execution_id, pods)
    new = r.exchange_worker_credential(plan.execution_id, digest(pods))
    assert r.check_worker_credential(plan.execution_id, new)
    assert not r.check_worker_credential(plan.execution_id, pods)


def test_killed_after_the_write_the_trade_is_not_made_twice(make, spec, launcher, client) -> None:  # type: ignore[no-untyped-def]
    plan = make().ensure_seats(spec)[0]
    pods = plan.worker_token.get_secret_value()
    seats_before = client.hgetall(make().keys.seats)
    with pytest.raises(InjectedFault):
        make(faults=CrashAt("after:exchange")).exchange_worker_credential(plan.execution_id, digest(pods))
    r = make()
    assert not r.check_worker_credential(plan.execution_id, pods)  # spent
    with pytest.raises(RecoveryRefused) as e:  # (the API answers 401 before this: the token is unknown)
        r.exchange_worker_credential(plan.execution_id, digest(pods))
    assert e.value.reason == "exchanged"
    assert client.hgetall(r.keys.seats) == seats_before
    # the worker, holding no credential, exits; its seat is fenced like any failed attempt, once
    failed = observe([(plan.execution_id, "eng-1", 1)], failed={plan.execution_id: "application_exit"})
    assert r.reconcile(spec, failed).fenced == [plan.execution_id]
    assert r.reconcile(spec, failed).fenced == []
