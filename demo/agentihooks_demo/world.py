"""What both stories share: the running stack plus the simulated kubelet, and ways to wait on them.

A :class:`World` creates the Swarm through the Kubernetes API, reads Pods,
status cards, checkpoints and metrics through the control API, and waits
(with a deadline and a message naming what it waited for) until the
operator and the workers have done their part.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .cluster import SWARMS
from .kubelet import PodRun, SimulatedKubelet
from .node import MERGE
from .stack import Stack

T = TypeVar("T")


class StoryFailed(AssertionError):
    """An outcome of the story was not what it should have been."""


@dataclass
class World:
    stack: Stack
    kubelet: SimulatedKubelet
    swarm: str
    say: Callable[[str], None] = print
    started: float = field(default_factory=time.monotonic)

    def step(self, text: str) -> None:
        self.say(f"[{time.monotonic() - self.started:5.1f}s] {text}")

    async def create_swarm(self, spec: dict[str, Any]) -> None:
        ns = self.kubelet.namespace
        body = {
            "apiVersion": "agentihooks.io/v1alpha1",
            "kind": "Swarm",
            "metadata": self.kubelet.api.creatable({"name": self.swarm, "namespace": ns}),
            "spec": spec,
        }
        r = await self.kubelet.http.post(SWARMS.format(ns=ns), json=body)
        if r.status_code >= 400:
            raise StoryFailed(f"Swarm {self.swarm} refused: {r.status_code} {r.text}")

    async def until(
        self, check: Callable[[], Awaitable[T | None] | T | None], what: str, within: float = 45.0
    ) -> T:
        deadline = time.monotonic() + within
        while True:
            value = check()
            if asyncio.iscoroutine(value):
                value = await value
            if value:
                return value  # type: ignore[return-value]
            if time.monotonic() > deadline:
                raise StoryFailed(f"timed out after {within:.0f}s waiting for {what}")
            await asyncio.sleep(0.2)

    async def run_of(self, seat: str, generation: int, *, started: bool = True) -> PodRun:
        def find() -> PodRun | None:
            for run in self.kubelet.runs(seat):
                if run.generation == generation and (run.proc is not None or not started):
                    return run
            return None

        return await self.until(find, f"{seat}'s generation {generation} Pod")

    async def worker_event(self, run: PodRun, *names: str) -> dict[str, Any]:
        def find() -> dict[str, Any] | None:
            return next((e for e in run.events() if e.get("event") in names), None)

        return await self.until(find, f"{' or '.join(names)} from {run.seat} gen {run.generation}")

    async def status(self) -> dict[str, Any]:
        async with self.stack.api() as api:
            r = await api.get(f"/v1/namespaces/{self.stack.kube.namespace}/swarms/{self.swarm}/status")
            r.raise_for_status()
            return dict(r.json())

    async def card(self, seat: str, **want: Any) -> dict[str, Any]:
        async def find() -> dict[str, Any] | None:
            try:
                doc = await self.status()
            except Exception:  # the API may still be publishing the swarm
                return None
            for card in doc.get("handoffs") or []:
                if card.get("seat") == seat and all(card.get(k) == v for k, v in want.items()):
                    return dict(card)
            return None

        return await self.until(find, f"{seat}'s card with {want}")

    async def checkpoints(self, seat: str) -> list[dict[str, Any]]:
        async with self.stack.api() as api:
            r = await api.get(
                f"/v1/namespaces/{self.stack.kube.namespace}/swarms/{self.swarm}/seats/{seat}/checkpoints"
            )
            if r.status_code != 200:
                return []
            return list(r.json().get("checkpoints") or [])

    async def captured(self, run: PodRun, *, native: bool | None = None) -> dict[str, Any]:
        async def find() -> dict[str, Any] | None:
            for row in await self.checkpoints(run.seat):
                if row.get("execution_id") != run.execution_id or not row.get("complete"):
                    continue
                if native is None or bool(row.get("native")) == native:
                    return row
            return None

        return await self.until(find, f"a committed checkpoint of {run.seat} gen {run.generation}")

    async def metrics(self) -> dict[str, float]:
        async with self.stack.api() as api:
            r = await api.get("/metrics")
            r.raise_for_status()
        out: dict[str, float] = {}
        for line in r.text.splitlines():
            if line and not line.startswith("#") and f'swarm="{self.swarm}"' in line:
                name, _, value = line.rpartition(" ")
                out[name] = float(value)
        return out

    async def annotate(self, run: PodRun, annotations: dict[str, str]) -> None:
        r = await self.kubelet.http.patch(
            f"/api/v1/namespaces/{self.kubelet.namespace}/pods/{run.name}",
            json={"metadata": {"annotations": annotations}},
            headers=MERGE,
        )
        r.raise_for_status()

    async def secret(self, name: str) -> dict[str, Any]:
        r = await self.kubelet.http.get(f"/api/v1/namespaces/{self.kubelet.namespace}/secrets/{name}")
        r.raise_for_status()
        return dict(r.json())


def expect(ok: bool, message: str) -> None:
    if not ok:
        raise StoryFailed(message)
