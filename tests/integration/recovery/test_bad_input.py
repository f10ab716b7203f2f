"""Bad input is refused with an error that names what was wrong, and nothing is written."""

from __future__ import annotations

import pytest
import redis
from agentihooks_checkpoint.catalog import EmptyCatalog
from agentihooks_operator.recovery import InvalidInput, Recovery
from testsupport.recovery import MemoryLauncher, dump_keys

GOOD = "exe-" + "c" * 32


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"swarm": "has space"}, "not a usable swarm name"),
        ({"prefix": "bad prefix"}, "not a usable key prefix"),
        ({"holder": ""}, "holder"),
        ({"lease_ms": 1}, "lease_ms"),
    ],
)
def test_bad_construction_is_named(client, kwargs, message) -> None:  # type: ignore[no-untyped-def]
    args = {"swarm": "ok", "holder": "ctl-a", "catalog": EmptyCatalog(), "launcher": MemoryLauncher()}
    args.update(kwargs)
    with pytest.raises((InvalidInput, ValueError), match=message):
        Recovery(client, args.pop("swarm"), **args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda r: r.report_watermark(GOOD, -1), "watermark"),
        (lambda r: r.report_watermark("pod-1", 5), "not an execution id"),
        (lambda r: r.report_session(GOOD, "has space"), "session_id"),
        (lambda r: r.mint_worker_credential("../etc"), "not an execution id"),
        (lambda r: r.record_request(GOOD, "fresh", ""), "agent"),
        (lambda r: r.record_request(GOOD, "later", "operator"), "not a recovery choice"),
    ],
)
def test_bad_arguments_are_named_and_change_nothing(make, client: redis.Redis, call, message) -> None:  # type: ignore[no-untyped-def]
    r = make()
    r.acquire()
    before = dump_keys(client)
    with pytest.raises(InvalidInput, match=message):
        call(r)
    assert dump_keys(client) == before


def test_credential_check_of_garbage_is_false(make) -> None:  # type: ignore[no-untyped-def]
    r = make()
    assert r.check_worker_credential(GOOD, "") is False
    assert r.check_worker_credential(GOOD, "not-the-token") is False
    assert r.check_worker_credential(GOOD, None) is False  # type: ignore[arg-type]
