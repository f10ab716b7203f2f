"""One seat of a Swarm on the real node, as the real-node cases read it: Pods, logs, records, cards.

Every real-node case (:mod:`.nodecase`, :mod:`.nodecases`) creates a Swarm of one seat whose Pods
run on the real node, then reads what the real parts did: the Pods the API server holds and created
(its audit log), how the kubelet reported a container's end, the worker's own lines in its container
log, the checkpoints and the seat's card on the control API, and the fence and decision records the
controller stored in Redis. Nothing here writes; the cases do.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import httpx

from .stack import Stack, StackError

EXE = "swarm.agentihooks.io/execution-id"
GENERATION = "swarm.agentihooks.io/generation"
#: Far above what a wait on a real container takes here; a guard against a hang, not a speed bound.
HANG = 300.0


class SeatOnNode:
    """Reads of the real cluster for seat ``seat`` of Swarm ``swarm`` (namespace: the stack's)."""

    def __init__(self, stack: Stack, node: Any, swarm: str, seat: str) -> None:
        assert stack.kube.plane is not None
        self.stack = stack
        self.plane = stack.kube.plane
        self.ns = stack.kube.namespace
        self.node = node
        self.swarm = swarm
        self.seat = seat

    def http(self) -> httpx.Client:
        return self.plane.client()

    def pods(self) -> list[dict[str, Any]]:
        with self.http() as c:
            r = c.get(
                f"/api/v1/namespaces/{self.ns}/pods",
                params={"labelSelector": f"swarm.agentihooks.io/swarm={self.swarm}"},
            )
            r.raise_for_status()
            return list(r.json().get("items") or [])

    def pod_of(self, generation: int) -> dict[str, Any] | None:
        return next(
            (p for p in self.pods() if p["metadata"]["labels"].get(GENERATION) == str(generation)), None
        )

    def watch_end(self, name: str, found: dict[str, Any]) -> None:
        """Fill ``found`` with the Pod's container end (``state.terminated``) as the kubelet reports
        it, from a watch: the operator deletes a fenced Pod within a second, before a poll may look.
        A watch that times out or breaks is opened again (for up to :data:`HANG` in all)."""
        params = {"watch": "true", "fieldSelector": f"metadata.name={name}", "timeoutSeconds": "60"}
        path = f"/api/v1/namespaces/{self.ns}/pods"
        deadline = time.monotonic() + HANG
        while time.monotonic() < deadline:
            try:
                with self.plane.client(timeout=90) as c, c.stream("GET", path, params=params) as r:
                    for line in r.iter_lines():
                        pod = (json.loads(line) if line.strip() else {}).get("object") or {}
                        statuses = (pod.get("status") or {}).get("containerStatuses") or []
                        ended = (statuses[0].get("state") or {}).get("terminated") if statuses else None
                        if ended:
                            found.update(ended)
                            return
            except httpx.HTTPError:
                time.sleep(0.5)

    def waiting_reason(self, generation: int) -> str | None:
        """Why the kubelet has not started the attempt's container (``ErrImageNeverPull``...)."""
        pod = self.pod_of(generation) or {}
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        waiting = (statuses[0].get("state") or {}).get("waiting") if statuses else None
        return str(waiting.get("reason")) if waiting and waiting.get("reason") else None

    def diagnosis(self, name: str) -> str:
        """What the tests print for a container that did not end (testsupport/nodediag.py): the
        Pod's status, its memory cgroups and processes, and the kubelet's and containerd's lines."""
        from testsupport.nodediag import diagnose  # type: ignore[import-not-found]

        with self.http() as c:
            r = c.get(f"/api/v1/namespaces/{self.ns}/pods/{name}")
        return str(diagnose(self.node, r.json() if r.status_code == 200 else None))

    def log(self, pod: str) -> str:
        root = self.node.root
        return "".join(p.read_text(errors="replace") for p in root.glob(f"pod-logs/*_{pod}_*/*/*.log"))

    def events(self, pod: str, *names: str) -> list[dict[str, Any]]:
        """The worker's event lines (``restore_verified``...) in ``pod``'s container log, parsed."""
        out = []
        for line in self.log(pod).splitlines():
            if any(f'"event": "{n}"' in line or f'"event":"{n}"' in line for n in names):
                try:
                    out.append(json.loads(line.split(" ", 3)[-1]))
                except ValueError:
                    continue
        return out

    def creates(self) -> list[str]:
        """This swarm's Pods the API server created (the audit log keeps each create's labels)."""
        out = []
        for e in self.plane.audit_events():
            ref = e.get("objectRef") or {}
            if e.get("verb") != "create" or ref.get("resource") != "pods" or ref.get("subresource"):
                continue
            meta = (e.get("requestObject") or {}).get("metadata") or {}
            swarm = (meta.get("labels") or {}).get("swarm.agentihooks.io/swarm")
            made = (e.get("responseStatus") or {}).get("code") == 201
            if ref.get("namespace") == self.ns and swarm == self.swarm and made:
                out.append(str(ref.get("name") or meta.get("name")))
        return out

    def control(self, under: str) -> dict[str, Any] | None:
        """GET ``/v1/namespaces/NS/swarms/SWARM<under>`` on the control API; ``None`` unless 200."""
        path = f"/v1/namespaces/{self.ns}/swarms/{self.swarm}{under}"
        headers = {"Authorization": f"Bearer {self.stack.token}"}
        try:
            r = httpx.get(self.stack.control_url + path, headers=headers, timeout=10)
        except httpx.HTTPError:
            return None
        return dict(r.json()) if r.status_code == 200 else None

    def checkpoints(self) -> list[dict[str, Any]]:
        return list((self.control(f"/seats/{self.seat}/checkpoints") or {}).get("checkpoints") or [])

    def native_checkpoint(self, held: bool) -> dict[str, Any] | None:
        """The newest complete native checkpoint, once ``held`` (the CLI waits on its next turn)."""
        if not held:
            return None
        rows = [c for c in self.checkpoints() if c.get("native") and c.get("complete")]
        return dict(rows[-1]) if rows else None

    def card(self, **want: Any) -> dict[str, Any] | None:
        for card in (self.control("/status") or {}).get("handoffs") or []:
            if card.get("seat") == self.seat and all(card.get(k) == v for k, v in want.items()):
                return dict(card)
        return None

    def records(self, execution_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The attempt's fence and decision records, as the controller stored them in Redis."""
        import redis
        from agentihooks_operator.recovery.store.keys import SwarmKeys

        keys = SwarmKeys("agentihooks", self.swarm, self.ns)
        client = redis.Redis.from_url(self.stack.redis_url)
        try:
            fence = client.hget(keys.attempt_fences, execution_id)
            decision = client.hget(keys.attempt_recoveries, execution_id)
        finally:
            client.close()
        return json.loads(fence or "{}"), json.loads(decision or "{}")


async def until(check: Callable[[], Any], what: str, within: float = HANG) -> Any:
    """Await ``check()`` (run in a thread) until it returns something truthy."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        value = await asyncio.to_thread(check)
        if value:
            return value
        if loop.time() > deadline:
            raise StackError(f"timed out after {within:.0f}s waiting for {what}")
        await asyncio.sleep(0.3)
