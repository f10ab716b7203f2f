"""The control API as a process of its own, which a test can SIGKILL and start again on the same port.

``python -m testsupport.control_api_process`` (with ``tests`` on ``PYTHONPATH``) reads one JSON
document from ``CONTROL_API_CONFIG``::

    {"redis_url": ..., "port": 8123, "store_root": ..., "operator_token": ..., "holder": "ctl-a",
     "swarms": {"swarm-a": <Swarm spec document>}, "kill_at": ""}

and serves the real control API (real Recovery on real Redis, real local checkpoint store) on
127.0.0.1:``port`` (``/healthz`` answers once it listens). ``kill_at`` makes it
SIGKILL itself, once, the way a node or an OOM kill would stop an operator:

* ``object:<n>``: while streaming checkpoint objects to a worker, once ``n`` bytes were read from
  the store (the answer's headers are already out: the worker sees the body break off);
* ``outcome``: when a worker's restore outcome arrives, before it is stored.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, BinaryIO, cast

import redis
from agentihooks_checkpoint.directive import RestoreOutcome
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores.local import LocalStore
from agentihooks_operator.api import ApiState, SwarmRegistry
from agentihooks_operator.api.access.auth import sha256_hex
from agentihooks_operator.api.server import run_control_api
from agentihooks_operator.recovery import Recovery
from agentihooks_operator.recovery.store.records import StoredOutcome
from agentihooks_operator.swarm import SwarmSpec

from testsupport.recovery import MemoryLauncher

CONFIG_ENV = "CONTROL_API_CONFIG"


def _die(why: str) -> None:
    sys.stderr.write(f"control_api_process: SIGKILL ({why})\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


class _CountingReader:
    def __init__(self, src: BinaryIO, store: KillingStore) -> None:
        self._src, self._store = src, store

    def read(self, n: int = -1) -> bytes:
        data = self._src.read(n)
        self._store.served += len(data)
        if self._store.kill_after is not None and self._store.served >= self._store.kill_after:
            _die(f"after streaming {self._store.served} object bytes")
        return data


class KillingStore(LocalStore):
    """A local store that kills the process once ``kill_after`` object bytes were read from it."""

    kill_after: int | None = None
    served = 0

    def open_read(self, scope: StoreScope, key: str) -> AbstractContextManager[BinaryIO]:
        if self.kill_after is None or not key.startswith("objects/"):
            return super().open_read(scope, key)
        return self._counted(scope, key)

    @contextmanager
    def _counted(self, scope: StoreScope, key: str) -> Any:
        with super().open_read(scope, key) as src:
            yield cast(BinaryIO, _CountingReader(src, self))


class KillingRecovery(Recovery):
    """A Recovery that dies when an outcome arrives (``kill_outcome``), before storing it."""

    kill_outcome = False

    def report_outcome(self, execution_id: str, outcome: RestoreOutcome) -> StoredOutcome:
        if self.kill_outcome:
            _die(f"when the outcome of {execution_id} arrived")
        return super().report_outcome(execution_id, outcome)


def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    cfg = json.loads(os.environ[CONFIG_ENV])
    kill_at = str(cfg.get("kill_at") or "")
    client = redis.Redis.from_url(cfg["redis_url"])
    store = KillingStore(Path(cfg["store_root"]))
    if kill_at.startswith("object:"):
        store.kill_after = int(kill_at.split(":", 1)[1])
    registry = SwarmRegistry()
    state = ApiState(
        registry=registry,
        redis=client,
        operator_hash=sha256_hex(cfg["operator_token"]),
        catalog=store,
        store=store,
    )
    for name, doc in cfg["swarms"].items():
        recovery = KillingRecovery(
            client, name, holder=cfg.get("holder", "ctl-a"), catalog=store, launcher=MemoryLauncher()
        )
        recovery.kill_outcome = kill_at == "outcome"
        recovery.acquire()  # the same holder as before the kill: it takes the lease over at once
        registry.publish(name, recovery, SwarmSpec.model_validate(doc), holder=cfg.get("holder", "ctl-a"))
    run_control_api(state, "127.0.0.1", int(cfg["port"]))


if __name__ == "__main__":
    main()
