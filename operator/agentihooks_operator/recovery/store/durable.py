"""Acknowledged means replicated: the optional ``WAIT`` after every guarded write.

Redis replicates asynchronously. Under Sentinel, a primary that dies right
after a fence script ran may take the fence with it: the promoted replica
never saw it, and a controller that already acted on the acknowledgement
(launched the replacement, released the slot) has acted on a write that no
longer exists. With a :class:`Durability` attached to the client
(``AGENTIHOOKS_REDIS_WAIT_REPLICAS``), each write script is followed by
``WAIT numreplicas timeout`` *in the same pipeline, on the same connection*
(one round trip): the write counts as done only once that many replicas hold
it. Fewer acknowledgements raise :class:`NotReplicated`: the outcome is
unknown, exactly like a lost connection, and the journal discipline makes the
next pass re-observe and re-send the step (every script is idempotent).

``WAIT`` counts what replicas acknowledged up to *this connection's* last
write. A script that finds its work already done writes nothing, so its
``WAIT`` would only confirm older writes of that connection: a fence another
connection (another thread, another replica) wrote and could not replicate
would then be acted on as if it were safe, and a failover could lose it after
its Pod was deleted and its replacement launched (the seat's old attempt
current again: launched a second time). So every script is pipelined with a
write of its own, ``INCR`` of the swarm's ``wait-mark``, between the script
and the ``WAIT``: replication is ordered, so replicas that hold the mark hold
everything the primary held when the script ran, whoever wrote it.

The durability is a property of the connection (``redisconn.connect``
registers it), so every :class:`~.writer.Writer` and lease on that client
honours it without being told.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

import redis
from redis.cluster import RedisCluster
from redis.commands.core import Script
from redis.exceptions import NoScriptError

from ..errors import RecoveryError


@dataclass(frozen=True)
class Durability:
    """``WAIT replicas timeout_ms`` after each write; ``replicas`` ≥ 1."""

    replicas: int
    timeout_ms: int

    def __post_init__(self) -> None:
        if self.replicas < 1:
            raise ValueError("Durability.replicas must be at least 1 (0 means no WAIT: attach none)")
        if self.timeout_ms < 1:
            raise ValueError("Durability.timeout_ms must be at least 1 (WAIT 0 would block forever)")


class NotReplicated(RecoveryError):
    """The write reached the primary but fewer replicas than required acknowledged it in time:
    its outcome is unknown (it may survive, or vanish in a failover). Nothing acts on it; the step
    is re-observed and, if missing, re-sent on the next pass. ``answer`` is what the script returned
    on the primary (``None`` when nothing ran): a caller may learn from it what it must account for,
    never act on it as done."""

    def __init__(self, message: str, answer: Any = None) -> None:
        super().__init__(message)
        self.answer = answer


_ATTACHED: WeakKeyDictionary[Any, Durability] = WeakKeyDictionary()


def attach(client: Any, durability: Durability | None) -> None:
    """Make every guarded write through ``client`` wait for ``durability`` (``None``: no wait).

    Not a Redis Cluster client: it cannot pipeline ``WAIT`` on the connection of the write."""
    if durability is not None and isinstance(client, RedisCluster):
        raise ValueError("WAIT durability is not supported on a Redis Cluster: use min-replicas-to-write")
    if durability is None:
        _ATTACHED.pop(client, None)
    else:
        _ATTACHED[client] = durability


def attached(client: Any) -> Durability | None:
    return _ATTACHED.get(client)


def load_scripts(client: redis.Redis, scripts: Sequence[Script]) -> None:
    """Load ``scripts`` in one pipeline; on a Redis Cluster (which refuses SCRIPT LOAD in a
    pipeline) one call per script, each sent to every primary."""
    if isinstance(client, RedisCluster):
        for script in scripts:
            client.script_load(script.script)
        return
    pipe = client.pipeline(transaction=False)
    for script in scripts:
        pipe.script_load(script.script)
    pipe.execute()


def run_script(
    client: redis.Redis, script: Script, keys: Sequence[str], args: Sequence[Any], *, mark: str
) -> Any:
    """Run ``script`` on ``client``; with a durability attached, pipelined with ``INCR mark`` and
    ``WAIT`` (one round trip, two on the first run after a primary lost its script cache). ``mark``:
    the swarm's ``wait-mark`` key, so the ``WAIT`` covers every write the primary held."""
    durability = attached(client)
    if durability is None:
        return script(keys=list(keys), args=list(args))
    for _ in range(2):
        pipe = client.pipeline(transaction=False)
        pipe.evalsha(script.sha, len(keys), *keys, *args)
        pipe.incr(mark)  # a write of this connection's, after everything the script saw
        pipe.execute_command("WAIT", durability.replicas, durability.timeout_ms)  # type: ignore[no-untyped-call]
        answer, _, acked = pipe.execute(raise_on_error=False)
        if isinstance(answer, NoScriptError):  # nothing ran (e.g. a freshly promoted replica)
            client.script_load(script.script)
            continue
        if isinstance(answer, Exception):
            raise answer
        if isinstance(acked, Exception):
            raise NotReplicated(f"the write ran but WAIT failed ({acked}): outcome unknown", answer)
        if int(acked) < durability.replicas:
            raise NotReplicated(
                f"the write reached {int(acked)} of {durability.replicas} replicas within "
                f"{durability.timeout_ms} ms: outcome unknown, re-observed on the next pass",
                answer,
            )
        return answer
    raise NotReplicated("the script was missing from Redis twice in a row: nothing ran")
