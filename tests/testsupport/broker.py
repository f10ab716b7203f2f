"""A real HTTP account broker on 127.0.0.1 for tests: counts every release it applies.

It speaks the protocol of ``agentihooks_operator.recovery.steps.broker`` and has
modes that a test switches at any time:

* ``normal`` — applies a release and answers 200; answers state queries.
* ``drop`` — applies the release, then closes the connection without an
  answer (outcome unknown to the controller, observable).
* ``refuse_state`` — like ``drop``, and every state query answers 503
  (unknown and unobservable: the controller holds the step).
* ``fail_before`` — answers 500 without applying anything.

``gate`` (a threading.Event) makes a release wait until it is set, after
``received`` is set: tests use it to have one request in flight, never sleeps.
``applied[slot]`` counts releases applied per slot, so a second release of the
same slot shows up as 2.
"""

from __future__ import annotations

import json
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal

from agentihooks_operator.swarm import SwarmSpec

Mode = Literal["normal", "drop", "refuse_state", "fail_before"]


class Broker:
    def __init__(self, credential: str | None = None) -> None:
        self.credential = credential
        self.mode: Mode = "normal"
        self.applied: Counter[str] = Counter()
        self.released: set[str] = set()
        self.requests: list[tuple[str, str]] = []
        #: Requests refused 401 because their Authorization header was missing or wrong.
        self.unauthorized = 0
        self.gate: threading.Event | None = None
        self.received = threading.Event()
        self.lock = threading.Lock()
        self.url = ""

    def total(self) -> int:
        return sum(self.applied.values())


def _handler(broker: Broker) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # quiet
            return

        def _send(self, status: int, body: dict[str, object]) -> None:
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def _authorized(self) -> bool:
            if broker.credential is None:
                return True
            if self.headers.get("Authorization") == f"Bearer {broker.credential}":
                return True
            with broker.lock:
                broker.unauthorized += 1
            self._send(401, {"error": "unauthorized"})
            return False

        def _drop(self) -> None:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)

        def _slot(self, suffix: str) -> str | None:
            parts = self.path.strip("/").split("/")
            if len(parts) >= 3 and parts[:2] == ["v1", "slots"] and "/".join(parts[3:]) == suffix:
                return parts[2]
            return None

        def do_POST(self) -> None:
            slot = self._slot("release")
            with broker.lock:
                broker.requests.append(("release", slot or self.path))
            if slot is None:
                self._send(404, {"error": "not_found"})
                return
            if not self._authorized():
                return
            broker.received.set()
            if broker.gate is not None:
                broker.gate.wait(30)
            mode = broker.mode
            if mode == "fail_before":
                self._send(500, {"error": "internal"})
                return
            with broker.lock:
                broker.applied[slot] += 1
                broker.released.add(slot)
            if mode in ("drop", "refuse_state"):
                self._drop()
                return
            self._send(200, {"state": "released"})

        def do_GET(self) -> None:
            slot = self._slot("")
            with broker.lock:
                broker.requests.append(("state", slot or self.path))
            if slot is None:
                self._send(404, {"error": "not_found"})
                return
            if not self._authorized():
                return
            if broker.mode == "refuse_state":
                self._send(503, {"error": "state unavailable"})
                return
            self._send(200, {"state": "released" if slot in broker.released else "active"})

    return Handler


@contextmanager
def running_broker(credential: str | None = None) -> Iterator[Broker]:
    """Serve a :class:`Broker` on a free loopback port until the block ends."""
    broker = Broker(credential)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(broker))
    server.daemon_threads = True
    broker.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="account-broker", daemon=True)
    thread.start()
    try:
        yield broker
    finally:
        if broker.gate is not None:
            broker.gate.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


class Clock:
    """Milliseconds the test moves by hand."""

    def __init__(self, start: int = 1_800_000_000_000) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


def with_broker(spec: SwarmSpec, url: str, secret: str | None = "broker-cred") -> SwarmSpec:
    data = spec.model_dump(by_alias=True, mode="json")
    data["accountBroker"] = {"url": url, "credentialSecret": secret, "timeoutSeconds": 5}
    return SwarmSpec.model_validate(data)


class BrokenClient:
    """An account-broker client with a bug: every call raises (an internal error, not a broker answer)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.calls = 0

    def release(self, slot: str) -> str:
        self.calls += 1
        raise RuntimeError("broker client bug")

    def observe(self, slot: str) -> str | None:
        self.calls += 1
        raise RuntimeError("broker client bug")


def broken_brokers(spec: object) -> BrokenClient:
    """A ``BrokerSource`` whose clients raise."""
    return BrokenClient(str(getattr(spec, "url", "")))
