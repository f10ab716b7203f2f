"""Leases under quiet running and shutdown: a healthy holder keeps its lease, a stopping one never takes any.

Two operator processes share one swarm. With nothing happening, the holder
must keep renewing its lease inside the TTL, also when the swarm's pass
interval is longer than the lease: the epoch (the count of takeovers) stays
the same for the whole quiet window. The window is measured in lease
periods: ``AGENTIHOOKS_LEASE_QUIET_PERIODS`` (default 40 periods of a 1.5 s
lease, so one minute) — the same number of renewals as ten minutes with the
product's default 15 s lease.

Then the holder gets SIGTERM: it gives the lease back as it stops and never
takes one again, and the other replica takes over before the old lease
would have run out (the new holder's first renewal time, on Redis's clock,
is earlier than the old lease's expiry), so the handover waited for no TTL.

The replicas run with the placement among replicas on (as installed), with a
short hold: whichever replica took the swarm first, it ends with the replica
the placement prefers (at most one planned handover, after ``hold``); the
quiet window starts once the lease has stayed put for three lease periods.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

import redis
from testsupport.kube import eventually, operator_process
from testsupport.node import RealKubelet as Kubelet
from testsupport.realcluster import RealCluster as Cluster
from testsupport.recovery import keys_of

from .conftest import swarm_spec
from .flows import running_seat

LEASE_MS = 1500
#: The placement's hold: a first holder that is not the preferred replica hands over after it.
PLACEMENT = {"AGENTIHOOKS_PLACEMENT_HOLD_SECONDS": "1"}
PERIODS = int(os.environ.get("AGENTIHOOKS_LEASE_QUIET_PERIODS", "40"))


def _lease(redis_url: str) -> tuple[dict[str, Any] | None, int]:
    client = redis.Redis.from_url(redis_url)
    keys = keys_of(client, "example")
    try:
        raw, epoch = client.get(keys.control_owner), client.get(keys.control_epoch)
    finally:
        client.close()
    return (json.loads(raw) if raw else None), int(epoch or 0)


async def _settled(redis_url: str, periods: int = 3, within: float = 60.0) -> tuple[dict[str, Any], int]:
    """The lease once it has kept the same holder and epoch for ``periods`` lease periods."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    seen, since = _lease(redis_url), loop.time()
    while True:
        await asyncio.sleep(0.25)
        now = _lease(redis_url)
        if now[0] is None or seen[0] is None or (now[0]["owner"], now[1]) != (seen[0]["owner"], seen[1]):
            seen, since = now, loop.time()
        elif loop.time() - since >= periods * LEASE_MS / 1000:
            return seen[0], seen[1]
        assert loop.time() < deadline, "the lease never settled on one holder"


async def test_quiet_replicas_never_retake_and_sigterm_hands_over_at_once(
    cluster: Cluster, kubelet: Kubelet, redis_url: str, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    async with (
        operator_process(
            cluster, redis_url, logs, operator_id="op-a", lease_ms=LEASE_MS, extra_env=PLACEMENT
        ) as a,
        operator_process(
            cluster, redis_url, logs, operator_id="op-b", lease_ms=LEASE_MS, extra_env=PLACEMENT
        ) as b,
    ):
        # A pass interval longer than the lease: renewal may not depend on passes.
        await cluster.create_swarm("example", swarm_spec(interval=5.0))
        await running_seat(cluster, kubelet, "example")
        await eventually(lambda: _lease(redis_url)[0], what="a lease holder")
        owner, start_epoch = await _settled(redis_url)

        await asyncio.sleep(PERIODS * LEASE_MS / 1000)

        still, epoch = _lease(redis_url)
        assert still is not None and still["owner"] == owner["owner"], "the holder kept its lease"
        assert epoch == start_epoch, f"{epoch - start_epoch} re-takes in {PERIODS} quiet lease periods"

        holder, other = (a, b) if owner["owner"] == "op-a" else (b, a)
        other_id = "op-b" if owner["owner"] == "op-a" else "op-a"
        before, _ = _lease(redis_url)
        assert before is not None
        holder.send_signal(signal.SIGTERM)
        new, new_epoch = await eventually(
            lambda: (lease := _lease(redis_url))[0] and lease[0]["owner"] == other_id and lease,
            what="the other replica holds the lease",
        )
        assert new_epoch == epoch + 1, "exactly one takeover"
        taken_at = int(new["expires_at"]) - LEASE_MS
        assert taken_at < int(before["expires_at"]), "taken before the old lease ran out: it was handed over"
        await asyncio.to_thread(holder.wait, 30)
        assert holder.returncode == 0, "a clean stop"
        assert other.poll() is None

    stopped_log = (logs / f"{owner['owner']}.log").read_text()
    after_signal = stopped_log.split("stopping (no lease is taken from now on)", 1)
    assert len(after_signal) == 2, "the stopping replica logged the signal"
    assert "took the lease" not in after_signal[1], "a stopping operator took a lease"
    assert _lease(redis_url)[1] == new_epoch, "stopping the last replica takes nothing either"
