"""Where each replica's control API answers, so a replica without a swarm's lease can forward a
request to the one that holds it (:mod:`.forward`).

Every replica with ``AGENTIHOOKS_API_ADVERTISE_URL`` set writes its address into
one Redis hash, ``<root>:{agentihooks-api}:endpoints`` (one key, so it works on a
Redis Cluster), under its operator id (the lease-holder id), stamped with the
server's ``TIME``; it refreshes the entry every ``REFRESH_SECONDS`` and removes
it at a clean shutdown. An entry older than ``STALE_MS`` (three refreshes) is
ignored, and the next refresh of any replica deletes it (a replica killed -9
leaves one behind). Both scripts read the time inside Redis: replicas' clocks
never matter.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
from typing import Any
from urllib.parse import urlsplit

import redis

log = logging.getLogger("agentihooks.api")
REFRESH_SECONDS = 20.0
STALE_MS = int(3 * REFRESH_SECONDS * 1000)

_NOW = "local t = redis.call('TIME')\nlocal now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
ADVERTISE = (
    _NOW
    + r"""
local entry = '{"url":' .. cjson.encode(ARGV[2]) .. ',"at":' .. string.format('%d', now) .. '}'
redis.call('HSET', KEYS[1], ARGV[1], entry)
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local ok, e = pcall(cjson.decode, all[i + 1])
  if not ok or type(e) ~= 'table' or type(e.at) ~= 'number' or now - e.at > tonumber(ARGV[3]) then
    redis.call('HDEL', KEYS[1], all[i])
  end
end
return now
"""
)
LOOKUP = _NOW + "return {redis.call('HGET', KEYS[1], ARGV[1]), now}\n"


def endpoints_key(prefix: str) -> str:
    """The one hash of every replica's address (hash tag ``{agentihooks-api}``)."""
    return f"{prefix}:{{agentihooks-api}}:endpoints"


def plain_address(url: str) -> str | None:
    """``url`` when it is ``http(s)://<IP>:<port>`` and nothing else, else ``None``.

    No host name, user, path, query or fragment, and never a link-local (the
    cloud metadata service lives there), multicast or unspecified address: an
    entry in Redis can only ever point at a replica's own listener.
    """
    try:
        parts = urlsplit(url)
        port = parts.port
        ip = ipaddress.ip_address(parts.hostname or "")
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or port is None or parts.username or parts.password:
        return None
    if parts.path not in ("", "/") or parts.query or parts.fragment or "#" in url or "?" in url:
        return None
    if ip.is_link_local or ip.is_multicast or ip.is_unspecified or ip.is_reserved:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return None
    return url


def fresh_url(raw: bytes | str | None, now_ms: int, stale_ms: int = STALE_MS) -> str | None:
    """The address in a stored entry, or ``None`` when there is none, it is unreadable, or it was
    written more than ``stale_ms`` before ``now_ms``."""
    if raw is None:
        return None
    try:
        entry: Any = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(entry, dict):
        return None
    url, at = entry.get("url"), entry.get("at")
    if not isinstance(url, str) or plain_address(url) is None:
        return None
    if not isinstance(at, (int, float)) or isinstance(at, bool):
        return None
    return url if 0 <= now_ms - at <= stale_ms else None


class Endpoints:
    """This replica's entry (:meth:`advertise`, :meth:`withdraw`) and the others' (:meth:`lookup`).

    Blocking (Redis calls): the API runs them off its event loop.
    """

    def __init__(self, client: redis.Redis, prefix: str, stale_ms: int = STALE_MS) -> None:
        if stale_ms <= 0:
            raise ValueError("stale_ms must be positive")
        self.client = client
        self.key = endpoints_key(prefix)
        self.stale_ms = stale_ms
        self._advertise = client.register_script(ADVERTISE)
        self._lookup = client.register_script(LOOKUP)

    def advertise(self, operator_id: str, url: str) -> None:
        """Write (or refresh) ``operator_id``'s address; drops every stale entry on the way."""
        if not operator_id or not url:
            raise ValueError("advertising needs an operator id and a URL")
        self._advertise(keys=[self.key], args=[operator_id, url, self.stale_ms])

    def withdraw(self, operator_id: str) -> None:
        self.client.hdel(self.key, operator_id)

    def lookup(self, operator_id: str) -> str | None:
        """``operator_id``'s advertised address if it is fresh, else ``None`` (one round trip)."""
        raw, now = self._lookup(keys=[self.key], args=[operator_id])
        return fresh_url(raw, int(now), self.stale_ms)


async def advertise_forever(endpoints: Endpoints, operator_id: str, url: str) -> None:
    """Refresh this replica's entry every ``REFRESH_SECONDS`` until cancelled, then remove it.

    A failed refresh is logged and retried at the next period (the entry goes stale after three).
    """
    try:
        while True:
            try:
                await asyncio.to_thread(endpoints.advertise, operator_id, url)
            except redis.RedisError as e:
                log.warning("control API: advertising this replica's address failed (%s)", type(e).__name__)
            await asyncio.sleep(REFRESH_SECONDS)
    finally:
        with contextlib.suppress(redis.RedisError):
            await asyncio.shield(asyncio.to_thread(endpoints.withdraw, operator_id))
