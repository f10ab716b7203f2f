"""Runs the guarded write scripts and counts what reaches Redis.

One :class:`Writer` per :class:`~..recovery.Recovery`. It knows the holder and
epoch, so callers pass only a script name and a payload. A lease refusal
raises :class:`~..errors.LeaseLost` after logging that nothing was changed;
``applied``/``refused`` count scripts so tests can prove a loser wrote nothing.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
from collections.abc import Callable
from typing import Any

import redis
from redis.commands.core import Script

from ..errors import LeaseLost, RecoveryError, StoreUnavailable
from .durable import load_scripts, run_script
from .keys import SwarmKeys
from .lua import PRELUDE
from .lua_bodies import BODIES

log = logging.getLogger("agentihooks.recovery")

#: Upper bound of the telemetry stream (approximate trimming).
EVENTS_MAXLEN = 10000
#: What Redis answers while it fails over or is out of reach (MasterNotFoundError and
#: BusyLoadingError are ConnectionErrors; a demoted primary answers READONLY): temporary, the
#: write's outcome unknown. Any other RedisError (a script error) is a fault of the write itself.
TRANSIENT = (redis.ConnectionError, redis.TimeoutError, redis.exceptions.ReadOnlyError)


class Writer:
    """Guarded writes for one swarm; thread-safe (counters under a lock)."""

    def __init__(
        self,
        client: redis.Redis,
        keys: SwarmKeys,
        holder: str,
        clock: Callable[[], int] | None,
    ) -> None:
        self.client = client
        self.keys = keys
        self.holder = holder
        self.clock = clock
        self.epoch = 0
        self.applied = 0
        self.refused = 0
        self.round_trips = 0
        self._lock = threading.Lock()
        self._scripts: dict[str, Script] = {
            name: client.register_script(PRELUDE + body) for name, body in BODIES.items()
        }

    def preload(self, extra: list[Script] | None = None) -> None:
        """Load every script into Redis in one round trip (a warm start; EVALSHA then never misses)."""
        load_scripts(self.client, [*self._scripts.values(), *(extra or [])])
        self.trip()

    def now_arg(self) -> str:
        """The time a script is given: none when the clock is Redis's own (the script reads ``TIME``
        inside Redis, no round trip of its own), else the injected clock's reading."""
        if self.clock is None or getattr(self.clock, "server_side", False):
            return ""
        return str(int(self.clock()))

    def trip(self, n: int = 1) -> None:
        with self._lock:
            self.round_trips += n

    def run(self, name: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Run write script ``name``; returns its answer, raises ``LeaseLost`` if the guard refused."""
        script = self._scripts[name]
        # ARGV[6]: this write's own token; a write of the seats map leaves it as the map's version
        # (random, so no version ever comes back, whatever a failover or a restore lost).
        nonce = secrets.token_hex(8)
        args: list[str | int] = [
            self.holder,
            self.epoch,
            self.now_arg(),
            json.dumps(payload),
            EVENTS_MAXLEN,
            nonce,
        ]
        try:
            raw = run_script(
                self.client, script, self.keys.all, args, mark=self.keys.wait_mark
            )  # with WAIT if attached
        except TRANSIENT as e:
            raise StoreUnavailable(f"redis did not answer the {name} write ({type(e).__name__})") from e
        except redis.RedisError as e:
            raise RecoveryError(f"redis refused the {name} write: {e}") from e
        finally:
            self.trip()
        answer: dict[str, Any] = json.loads(raw)
        if "lease" in answer:
            with self._lock:
                self.refused += 1
            log.warning(
                "recovery of swarm %s: %s lost the lease (epoch %s, now %s): the %s write changed nothing",
                self.keys.label,
                self.holder,
                self.epoch,
                answer.get("epoch"),
                name,
            )
            raise LeaseLost(f"{self.holder} does not hold the lease of swarm {self.keys.label}")
        with self._lock:
            self.applied += 1
        return answer
