"""Where a fenced attempt's provider account slot is ended: the built-in pool, or an external broker.

The built-in pool lives in the swarm's Redis (``account-slots``) and is ended
inside the same Lua script that records the release in the fence, so its
outcome is never unknown. An external broker is another system reached over
HTTP; a request to it can time out or lose its connection after it was sent,
so its outcome may be unknown and has to be observed before it is sent again.

Broker protocol (both calls carry ``Authorization: Bearer <credential>`` when
a credential is configured; the slot id is the attempt's execution id):

* ``POST {url}/v1/slots/{slot}/release`` — 200/204 released; 409 already
  released (counts as released); other 4xx refused, nothing applied; 5xx,
  a timeout or a dropped connection after sending: unknown.
* ``GET {url}/v1/slots/{slot}`` — 200 ``{"state": "released" | "active"}``.
  Any other answer, or none, means the broker cannot be observed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Literal, Protocol

import httpx

from ...swarm import AccountBrokerSpec

log = logging.getLogger("agentihooks.recovery")

#: What one release request did: confirmed, definitely not applied, or nobody knows.
SendResult = Literal["released", "failed", "unknown"]
#: What the broker says about a slot: released already, or still active.
Observation = Literal["applied", "not_applied"]


class AccountBroker(Protocol):
    """An external holder of provider account slots (sync; called from the pass's thread)."""

    #: Identifies the broker in a held recovery's plan (a changed URL changes the plan).
    url: str

    def release(self, slot: str) -> SendResult:
        """Ask the broker to end ``slot``."""
        ...

    def observe(self, slot: str) -> Observation | None:
        """Whether ``slot`` was released; ``None`` when the broker cannot say."""
        ...


#: Builds the broker of a swarm from its ``accountBroker`` spec.
BrokerSource = Callable[[AccountBrokerSpec], AccountBroker]


class HttpBroker:
    """:class:`AccountBroker` over HTTP with ``httpx`` (sync, bounded timeouts, no retries)."""

    def __init__(
        self,
        url: str,
        credential: str | None = None,
        *,
        timeout: float = 10.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        parsed = httpx.URL(self.url)
        #: What log lines name: scheme, host and port only (never user info from the URL).
        self.shown = f"{parsed.scheme}://{parsed.host}" + (f":{parsed.port}" if parsed.port else "")
        headers = {"Accept": "application/json", "User-Agent": "agentihooks-operator"}
        if credential:
            headers["Authorization"] = f"Bearer {credential}"
        self._http = httpx.Client(
            base_url=self.url,
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def release(self, slot: str) -> SendResult:
        try:
            resp = self._http.post(f"/v1/slots/{slot}/release")
        except (httpx.ConnectError, httpx.ConnectTimeout) as e:
            # The request never left: nothing can have been applied.
            log.warning(
                "account broker %s: cannot connect (%s): release not sent", self.shown, type(e).__name__
            )
            return "failed"
        except httpx.HTTPError as e:
            log.warning("account broker %s: release outcome unknown (%s)", self.shown, type(e).__name__)
            return "unknown"
        if resp.status_code in (200, 204, 409):
            return "released"
        if resp.status_code >= 500:
            log.warning(
                "account broker %s: release answered %s: outcome unknown", self.shown, resp.status_code
            )
            return "unknown"
        log.warning("account broker %s: release refused with %s", self.shown, resp.status_code)
        return "failed"

    def observe(self, slot: str) -> Observation | None:
        try:
            resp = self._http.get(f"/v1/slots/{slot}")
            state = resp.json().get("state") if resp.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError) as e:
            log.warning("account broker %s: slot state unavailable (%s)", self.shown, type(e).__name__)
            return None
        if state == "released":
            return "applied"
        if state == "active":
            return "not_applied"
        log.warning("account broker %s: slot state unavailable (answer %s)", self.shown, resp.status_code)
        return None


class HttpBrokers:
    """A :data:`BrokerSource` that keeps one :class:`HttpBroker` per configuration.

    ``read_secret(name)`` returns the ``token`` of the named Secret (the
    operator passes its Kubernetes reader bound to the swarm's namespace); it
    is read when a configuration is first seen and never logged.
    """

    def __init__(self, read_secret: Callable[[str], str | None] | None = None) -> None:
        self._read = read_secret
        self._lock = threading.Lock()
        self._made: dict[AccountBrokerSpec, HttpBroker] = {}

    def __call__(self, spec: AccountBrokerSpec) -> AccountBroker:
        with self._lock:
            found = self._made.get(spec)
            if found is None:
                credential = None
                if spec.credential_secret and self._read is not None:
                    credential = self._read(spec.credential_secret)
                found = HttpBroker(spec.url, credential, timeout=spec.timeout_seconds)
                if credential or not spec.credential_secret:
                    # A credential that could not be read yet is read again next time, not cached away.
                    self._made[spec] = found
            return found
