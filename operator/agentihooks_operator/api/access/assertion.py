"""What a replica sends instead of the caller's credential when it forwards a request to the holder.

A replica that receives a write it cannot serve (another replica holds the swarm's lease) has
already authenticated the caller. It forwards the request without the caller's bearer token and
with an assertion instead: ``v1.<expiry>.<nonce>.<caller digest>.<signature>``, an HMAC-SHA256 over
the method, the path and query, the body's sha256, the caller's credential digest (a hash: nothing
a receiver could present as a bearer token), the expiry and a nonce. The holder accepts a forwarded
request only with a valid assertion: signed with the replicas' key, not expired, bound to exactly
this method, path and body, and its nonce not seen before (each assertion is used once).

The key is shared through Redis (``<prefix>:{agentihooks-api}:forward-key``, 32 random bytes made
by the first replica that needs it): only the replicas reach Redis (the chart's NetworkPolicy), and
whoever could read it could write the recovery state itself. Refusals say why in the log line
(``expired``, ``replayed``, ``bad signature``...) and never carry the header or the body.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
import time

import redis
from aiohttp import web

#: The request header carrying the assertion.
HEADER = "X-Agentihooks-Assertion"
#: Seconds an assertion is valid (a forwarded request is sent at once).
TTL_SECONDS = 30
_FORMAT = re.compile(r"^v1\.(\d{1,12})\.([0-9a-f]{32})\.([0-9a-f]{64})\.([0-9a-f]{64})$")


class AssertionRefused(Exception):
    """A forwarded request's assertion is missing, malformed, expired, replayed or forged."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def key_name(prefix: str) -> str:
    return f"{prefix}:{{agentihooks-api}}:forward-key"


def _mac(key: bytes, request: tuple[str, str, bytes], digest: str, expiry: int, nonce: str) -> str:
    method, path, body = request
    body_hash = hashlib.sha256(body).hexdigest()
    text = "\n".join(("v1", method.upper(), path, body_hash, digest, str(expiry), nonce))
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


class Assertions:
    """Signs assertions (the forwarding replica) and checks them once each (the holder)."""

    def __init__(self, client: redis.Redis, prefix: str, clock: object = time.time) -> None:
        self._client = client
        self._name = key_name(prefix)
        self._clock = clock
        self._key: bytes | None = None
        self._seen: dict[str, float] = {}
        self._lock = threading.Lock()

    def _now(self) -> float:
        return float(self._clock())  # type: ignore[operator]

    def key(self) -> bytes:
        """The replicas' shared key (blocking: read from Redis, made there once if absent)."""
        if self._key is None:
            self._client.set(self._name, secrets.token_hex(32), nx=True)
            raw = self._client.get(self._name)
            if not raw:
                raise AssertionRefused("no forwarding key")
            self._key = raw if isinstance(raw, bytes) else str(raw).encode()
        return self._key

    def sign(self, method: str, path: str, body: bytes, digest: str) -> str:
        """An assertion for one forwarded request of the caller whose credential digest is ``digest``."""
        expiry = int(self._now()) + TTL_SECONDS
        nonce = secrets.token_hex(16)
        mac = _mac(self.key(), (method, path, body), digest, expiry, nonce)
        return f"v1.{expiry}.{nonce}.{digest}.{mac}"

    def verify(self, header: str, method: str, path: str, body: bytes) -> str:
        """The caller's credential digest the assertion vouches for; :class:`AssertionRefused` else."""
        found = _FORMAT.fullmatch(header or "")
        if found is None:
            raise AssertionRefused("malformed")
        expiry, nonce, digest, mac = int(found[1]), found[2], found[3], found[4]
        want = _mac(self.key(), (method, path, body), digest, expiry, nonce)
        if not hmac.compare_digest(mac, want):
            raise AssertionRefused("bad signature")
        now = self._now()
        if not now <= expiry <= now + TTL_SECONDS + 5:
            raise AssertionRefused("expired")
        with self._lock:
            self._seen = {n: e for n, e in self._seen.items() if e >= now}
            if nonce in self._seen:
                raise AssertionRefused("replayed")
            self._seen[nonce] = expiry
        return digest


#: The app's signer and checker (set up with forwarding, :mod:`.forward`).
ASSERTIONS: web.AppKey[Assertions] = web.AppKey("assertions", Assertions)
