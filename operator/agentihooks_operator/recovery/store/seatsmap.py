"""The seats map read once per change: a quiet pass asks for its version, not for its 50,000 entries.

Every write script that changes the seats map (seat → current attempt) leaves
its own random token in ``seats-version`` (:data:`.lua.PRELUDE`'s
``seats_moved``): field ``v`` on every change, field ``k`` too when seats were
added (the map's names change only then: seats are never removed from it). A
reader holds the token of what it last read and asks, in one round trip,
for the map only if the token moved; otherwise the reply is the token alone,
whatever the swarm's size.

Random tokens, not a counter: a failover that loses the last writes, a
flushed or restored Redis, never bring back a version a reader holds with
other contents. A map that has no version yet (written by an older release,
or never written) gets one from the reader, in the same script as its read.

Correctness never rests on this: every write script re-checks the seats map
itself, so a reader's stale copy can only make it act late, never twice.
"""

from __future__ import annotations

import secrets
from typing import Literal

import redis
from redis.commands.core import Script

from .keys import SwarmKeys

#: KEYS: version hash, seats map. ARGV: the token the caller holds, a token for a map that has none,
#: the field (``v``: the whole map, ``k``: its names), the read (HGETALL or HKEYS).
IF_MOVED_LUA = """
redis.call('HSETNX', KEYS[1], ARGV[3], ARGV[2])
local token = redis.call('HGET', KEYS[1], ARGV[3])
if token == ARGV[1] then return {token} end
return {token, redis.call(ARGV[4], KEYS[2])}
"""

What = Literal["map", "names"]
_READS = {"map": ("v", "HGETALL"), "names": ("k", "HKEYS")}


def _s(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else v


class SeatsReader:
    """One reader's copy of the seats map (``map``) or of its seat names (``names``)."""

    def __init__(self, client: redis.Redis, keys: SwarmKeys, what: What) -> None:
        self._client = client
        self._keys = keys
        self._field, self._read = _READS[what]
        self._script: Script | None = None
        self.token = ""
        #: How many times the map itself crossed (tests and the benchmark count them).
        self.reads = 0

    def forget(self) -> None:
        """The next :meth:`moved` reads the map whatever its version."""
        self.token = ""

    def moved(self) -> list[str] | None:
        """The map's flat reply (HGETALL pairs or HKEYS names) if it changed since the last call,
        ``None`` if it did not. One round trip either way."""
        if self._script is None:
            self._script = self._client.register_script(IF_MOVED_LUA)
        args = [self.token, secrets.token_hex(8), self._field, self._read]
        reply = self._script(keys=[self._keys.seats_version, self._keys.seats], args=args)
        token = _s(reply[0])
        if len(reply) == 1:
            return None
        self.token = token
        self.reads += 1
        return [_s(v) for v in reply[1]]
