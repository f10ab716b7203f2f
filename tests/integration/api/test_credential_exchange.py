"""A worker trades the credential its Pod started with for one only it knows, once.

Real Redis and the live control API. Every process of a worker's container was started with the
Pod's credential (the image's init too, where the agent can read it); the worker's first call trades
it for a new one. Afterwards the first credential is an unknown token on every route (401, like a
forged one), the new one works, the trade is never repeated with the first one, its answer is never
cached, a fenced attempt is told so (410), and no token reaches the log.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from testsupport.control_api import make_world


def test_the_pods_credential_trades_once_for_a_new_one(
    redis_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with make_world(redis_url, tmp_path) as w:
        eid = w.first["swarm-a"].execution_id
        first = w.worker_token(eid)
        r = w.call("POST", f"/v1/executions/{eid}/credential", first)
        assert r.status_code == 200, r.text
        assert r.headers["Cache-Control"] == "no-store"
        new = r.json()["token"]
        assert isinstance(new, str) and len(new) >= 32 and new != first

        lease = f"/v1/executions/{eid}/lease"
        assert w.call("POST", lease, first, json={}).status_code == 401  # matches nothing now
        assert w.call("POST", lease, new, json={}).status_code == 200
        again = w.call("POST", f"/v1/executions/{eid}/credential", first)
        assert again.status_code == 401  # the Pod's credential trades once
        other = w.first["swarm-b"].execution_id if "swarm-b" in w.first else None
        if other is not None:  # a credential never trades for another attempt
            assert w.call("POST", f"/v1/executions/{other}/credential", new).status_code == 403
        for token in (first, new):
            assert token not in caplog.text


def test_a_fenced_attempt_trades_nothing(redis_url: str, tmp_path: Path) -> None:
    with make_world(redis_url, tmp_path) as w:
        eid = w.first["swarm-a"].execution_id
        first = w.worker_token(eid)
        w.fail()  # its Pod's deletion was lost: the worker still calls
        r = w.call("POST", f"/v1/executions/{eid}/credential", first)
        assert r.status_code == 410, r.text
        assert "token" not in r.text
