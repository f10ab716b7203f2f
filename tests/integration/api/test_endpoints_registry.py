"""The replicas' address registry on a real Redis: one hash, stamped with the server's time, stale
entries ignored and swept, an entry removed when its replica's advertising stops."""

from __future__ import annotations

import asyncio
import json

import pytest
import redis
from agentihooks_operator.api.access import endpoints as ep
from agentihooks_operator.api.access.endpoints import STALE_MS, Endpoints, advertise_forever


def test_an_advertised_address_is_found_until_it_is_withdrawn(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    reg = Endpoints(client, "agentihooks")
    reg.advertise("ctl-a", "http://10.0.0.1:8080")
    reg.advertise("ctl-b", "http://10.0.0.2:8080")
    assert reg.lookup("ctl-a") == "http://10.0.0.1:8080" and reg.lookup("ctl-b") == "http://10.0.0.2:8080"
    assert reg.lookup("ctl-c") is None
    assert set(client.hkeys(reg.key)) == {b"ctl-a", b"ctl-b"}  # one key for every replica
    reg.withdraw("ctl-a")
    assert reg.lookup("ctl-a") is None and reg.lookup("ctl-b") == "http://10.0.0.2:8080"
    client.close()


def test_a_stale_entry_is_ignored_and_swept_by_the_next_refresh(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    reg = Endpoints(client, "agentihooks")
    old = int(client.time()[0]) * 1000 - STALE_MS - 1000
    client.hset(reg.key, "killed", json.dumps({"url": "http://10.0.0.9:8080", "at": old}))
    client.hset(reg.key, "garbled", "not json")
    assert reg.lookup("killed") is None
    reg.advertise("ctl-a", "http://10.0.0.1:8080")
    assert client.hkeys(reg.key) == [b"ctl-a"]
    client.close()


def test_advertising_refreshes_and_its_end_removes_the_entry(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ep, "REFRESH_SECONDS", 0.05)
    client = redis.Redis.from_url(redis_url)
    reg = Endpoints(client, "agentihooks")

    async def run() -> list[int]:
        task = asyncio.create_task(advertise_forever(reg, "ctl-a", "http://10.0.0.1:8080"))
        stamps: list[int] = []
        while len(set(stamps)) < 2:  # two different refreshes seen
            await asyncio.sleep(0.02)
            raw = client.hget(reg.key, "ctl-a")
            if raw is not None:
                stamps.append(json.loads(raw)["at"])
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return stamps

    stamps = asyncio.run(asyncio.wait_for(run(), 30))
    assert stamps == sorted(stamps)
    assert client.hget(reg.key, "ctl-a") is None  # a clean stop leaves nothing behind
    client.close()


def test_the_registry_works_on_a_redis_cluster(redis_cluster) -> None:  # type: ignore[no-untyped-def]
    """One key, so its scripts run on whichever primary owns its slot (no cross-slot command)."""
    redis_cluster.flush()
    client = redis_cluster.client()
    reg = Endpoints(client, "agentihooks")  # type: ignore[arg-type]
    reg.advertise("ctl-a", "http://10.0.0.1:8080")
    assert reg.lookup("ctl-a") == "http://10.0.0.1:8080"
    reg.withdraw("ctl-a")
    assert reg.lookup("ctl-a") is None
    client.close()
