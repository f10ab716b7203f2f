"""Which operator replicas are alive: one heartbeat per replica, one Redis round trip each time.

Several replicas share swarms (:mod:`.placement`); to rank them each needs the
same list of live replicas. Every replica beats every few seconds with one
Lua script that reads the server's ``TIME``, records its own beat, and
returns the replicas whose last beat is at most ``dead_ms`` old, with the time
each joined. A replica whose beats pause longer (a stalled process) keeps its
join time when it beats again, so it is settled at once and nothing moves
twice; only after twenty times ``dead_ms`` is it forgotten. Two keys under the hash tag ``{operators}``
(``<root>:{operators}:beats``, a sorted set of last beats, and
``<root>:{operators}:joined``), so the script works on a Redis Cluster too.

A member is ``<token> <operator id>`` (the token has no space; the id may):
the token is new in every process, so a restarted replica with the same id
joins again (and settles again).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import redis

BEAT = r"""
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[3] == 'leave' then
  redis.call('ZREM', KEYS[1], ARGV[1]); redis.call('HDEL', KEYS[2], ARGV[1])
  return {now, {}, {}}
end
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('HSETNX', KEYS[2], ARGV[1], now)
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - 20 * tonumber(ARGV[2])))
for _, m in ipairs(gone) do redis.call('ZREM', KEYS[1], m); redis.call('HDEL', KEYS[2], m) end
local live = redis.call('ZRANGEBYSCORE', KEYS[1], now - tonumber(ARGV[2]), '+inf')
return {now, live, redis.call('HMGET', KEYS[2], unpack(live))}
"""


@dataclass(frozen=True)
class Members:
    """The live replicas at one reading: operator id → when it joined (server ms), and that time."""

    now_ms: int
    joined_ms: dict[str, int] = field(default_factory=dict)

    def settled(self, settle_ms: int) -> list[str]:
        """The replicas that have been live for at least ``settle_ms`` (placement candidates)."""
        return sorted(r for r, joined in self.joined_ms.items() if self.now_ms - joined >= settle_ms)


def parse(answer: list[Any]) -> Members:
    """The script's ``{now, members, joined}`` as :class:`Members` (a replica live under two tokens,
    a restart with the same id, counts from its earliest join)."""
    now, names, joined = answer
    out: dict[str, int] = {}
    for member, when in zip(names or [], joined or [], strict=True):
        text = member.decode() if isinstance(member, bytes) else str(member)
        _, _, operator_id = text.partition(" ")
        if not operator_id or when is None:
            continue
        at = int(when)
        out[operator_id] = min(at, out.get(operator_id, at))
    return Members(now_ms=int(now), joined_ms=out)


class Membership:
    """This replica's registration: :meth:`beat` (returns who is live) and :meth:`leave`."""

    def __init__(self, client: redis.Redis, prefix: str, operator_id: str, dead_ms: int) -> None:
        if not operator_id:
            raise ValueError("an operator id must not be empty")
        if dead_ms <= 0:
            raise ValueError("dead_ms must be positive")
        self.operator_id = operator_id
        self.member = f"{uuid.uuid4().hex} {operator_id}"
        self.keys = [f"{prefix}:{{operators}}:beats", f"{prefix}:{{operators}}:joined"]
        self.dead_ms = dead_ms
        self._script = client.register_script(BEAT)

    def beat(self) -> Members:
        return parse(self._script(keys=self.keys, args=[self.member, self.dead_ms, ""]))

    def leave(self) -> None:
        self._script(keys=self.keys, args=[self.member, self.dead_ms, "leave"])
