"""The campaign's seat agents: what a worker does for the one-live-agent rule, without a container.

The campaign's Pods run on a simulated kubelet, so no worker process would
speak for a seat. Each Running seat Pod gets a :class:`SeatAgent` instead: the
worker's own lease code (``agentihooks_worker.lease.WorkerLease``, what a real
worker runs) renewing through the real control API of a live replica with the
attempt's own credential (read from its Secret, as the Pod mounts it, with the
lease's length from the launch record there), and an agent that sends the
loopback model API a request about every half second, carrying the attempt's
``X-Agentihooks-Execution`` header, for as long as the lease lets it.

An agent ends three ways, as a worker's container would:

* **killed** (:meth:`SeatAgent.kill`): the world failed its Pod, or its kubelet
  finished the Pod's deletion; the agent stops before that is written;
* **stopped by its lease** (cut off for too long, or answered ``410 fenced``):
  the worker exits 76 or 77; ``on_exit`` tells the world, which writes that exit
  as the container's if the node's kubelet can still report it;
* never acquiring the lease (the attempt fenced before it ran): exit 77 or 70.

:attr:`SeatAgent.cut` is the worker side of a partition: while it is set, no
renewal reaches a controller (each one times out as a dropped connection does).
The model API's log is the judge: :func:`requests` turns it into history entries.
"""

from __future__ import annotations

import base64
import contextlib
import json
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
from agentihooks_checkpoint.stores.remote import ControlReporter
from agentihooks_worker.errors import EXIT_FAILURE, EXIT_FENCED, EXIT_LEASE_EXPIRED
from agentihooks_worker.lease import WorkerLease, is_fenced

from ..model_api import ATTEMPT_HEADER, ModelApi
from .history import Request

#: Seconds a renewal may take before it counts as lost (a dropped connection is a timeout).
RENEW_TIMEOUT_S = 2.0
#: What the agent sends between requests (a busy agent: a turn every half second or so).
TURN_S = (0.3, 0.7)
#: The stop budget: the harness's SIGTERM-to-SIGKILL time of a real worker (kill_seconds, at most lease/4).
STOP_BUDGET_S = 2.0


class SeatAgent:
    """One attempt's worker, as far as its lease and its model requests go."""

    def __init__(
        self,
        *,
        pod: str,
        node: str,
        attempt: str,
        token: str,
        lease_seconds: float,
        urls: Callable[[], list[str]],
        model_url: str,
        on_exit: Callable[[SeatAgent], None],
        seed: str,
        obey_lease: bool = True,
    ) -> None:
        self.pod, self.node, self.attempt = pod, node, attempt
        self.urls = urls
        self.model_url = model_url.rstrip("/")
        self.on_exit = on_exit
        #: Set while this worker is cut off from every controller.
        self.cut = threading.Event()
        #: The worker's exit code once it ended by itself (``None``: running, or killed).
        self.exit_code: int | None = None
        self.killed = threading.Event()
        self._rng = random.Random(seed)
        #: ``False``: a broken worker, whose agent goes on after the lease stopped it (only a kill ends it).
        self.obey_lease = obey_lease
        self._http = httpx.Client(timeout=RENEW_TIMEOUT_S)
        self._reporters: dict[str, ControlReporter] = {}
        self._token = token
        self.lease = WorkerLease(self._renew, duration=lease_seconds, stop_budget=STOP_BUDGET_S)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"agent-{pod}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def kill(self) -> None:
        """The container died (every process at once): no request after this returns."""
        self.killed.set()
        self._stop.set()  # the agent's thread ends its lease (it never blocks the caller)

    def close(self) -> None:
        self.kill()
        self._thread.join(timeout=5)
        self._http.close()

    # -- the worker ------------------------------------------------------------------------------
    def _renew(self) -> object:
        """One renewal through a live replica (any one, as a Service would pick)."""
        if self.killed.is_set():
            raise httpx.ConnectError("the container is gone")
        if self.cut.is_set():
            time.sleep(RENEW_TIMEOUT_S)  # nothing comes back across a partition
            raise httpx.ConnectTimeout("cut off from the control API")
        urls = self.urls()
        if not urls:
            raise httpx.ConnectError("no replica to talk to")
        url = self._rng.choice(urls)
        reporter = self._reporters.get(url)
        if reporter is None:
            reporter = ControlReporter(url, self.attempt, self._token, http=self._http, retry_seconds=0.5)
            self._reporters[url] = reporter
        return reporter.renew_lease()

    def _run(self) -> None:
        try:
            self.lease.acquire(timeout=10.0)
        except Exception as e:
            self._exit(EXIT_FENCED if is_fenced(e) else EXIT_FAILURE)
            return
        self.lease.start(lambda _reason: self._stop.set() if self.obey_lease else None)
        with httpx.Client(timeout=5.0) as model:
            while not self._stop.wait(self._rng.uniform(*TURN_S)):
                # the harness, between its turns: it sends only while its worker lets it run
                with contextlib.suppress(httpx.HTTPError):
                    model.post(
                        f"{self.model_url}/v1/messages",
                        json={
                            "model": "campaign",
                            "max_tokens": 8,
                            "messages": [{"role": "user", "content": "go"}],
                        },
                        headers={ATTEMPT_HEADER: self.attempt, "x-api-key": "campaign"},
                    )
        self.lease.close()
        if self.killed.is_set():
            return
        self._exit(EXIT_FENCED if self.lease.stopped == "fenced" else EXIT_LEASE_EXPIRED)

    def _exit(self, code: int) -> None:
        if self.killed.is_set():
            return
        self.exit_code = code
        self.on_exit(self)


def credential(secret: dict[str, Any]) -> tuple[str, float | None]:
    """The worker token and the lease's length (``None``: no lease) from an attempt's Secret."""
    data = secret.get("data") or {}
    token = base64.b64decode(data.get("token", "")).decode()
    record = json.loads(base64.b64decode(data.get("launch.json", "") or b"e30=").decode() or "{}")
    seconds = record.get("worker_lease_seconds")
    return token, float(seconds) if seconds else None


def requests(model: ModelApi, swarm_of: dict[str, str], t0: float) -> list[Request]:
    """Every model request an attempt of the campaign sent, as history entries (times from ``t0``)."""
    out = []
    for r in model.snapshot():
        attempt = r.attempt
        if attempt is not None and attempt in swarm_of:
            out.append(
                Request(t=max(0.0, r.wall - t0), kind="request", swarm=swarm_of[attempt], attempt=attempt)
            )
    return out
