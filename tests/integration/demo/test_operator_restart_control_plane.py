"""Replacements ride out an operator restart, on the real control plane: no seat loses continuity.

The demo's system with ``control_plane`` (real etcd, kube-apiserver,
kube-controller-manager; the real operator and its control API as a process;
the simulated kubelet running every Pod as a real ``agentihooks-worker boot``
with ``checkpoint_remote``). Two seats capture native checkpoints and are
OOM-killed together; the operator resumes both natively. As the kubelet
starts the last of the two replacements, the operator process is SIGKILLed (so
both exist whatever order the operator created them in); it is started
again (same command, same environment, same port) 10 seconds later. Both
replacements keep retrying their store reads and outcome reports, restore
natively from their checkpoints and have their outcomes stored as verified;
nothing is fenced twice and no third generation is launched.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from agentihooks_demo.cases import PROJECT
from agentihooks_demo.containers import env_for_workers
from agentihooks_demo.harness import fake_harness_bin
from agentihooks_demo.kubelet import PodRun, SimulatedKubelet
from agentihooks_demo.procs import Child, Processes
from agentihooks_demo.stack import demo_repository, start_stack
from agentihooks_demo.world import World

from .conftest import requires_control_plane

pytestmark = pytest.mark.slow

SWARM = "restart"
SEATS = ("eng-1", "eng-2")
RESTART_AFTER_S = 10.0


def spec() -> dict[str, Any]:
    return {
        "image": "ghcr.io/agentihooks/worker:2.1.0",
        "harness": {"name": "claude", "command": ["claude", "-p", "Work on your task"]},
        "seats": [
            {"name": s, "project": PROJECT, "task": {"id": f"t-{s}", "text": f"Restart case {s}"}}
            for s in SEATS
        ],
        "recovery": {"automation": True, "imagePullGraceSeconds": 2, "passIntervalSeconds": 0.5},
        "checkpointStore": {"remote": True},
    }


class Killer:
    """Kills the operator process once, when the kubelet admits the last seat's replacement Pod."""

    def __init__(self) -> None:
        self.operator: Child | None = None
        self.replacements: set[str] = set()
        self.argv: list[str] = []
        self.env: dict[str, str] = {}
        self.killed = asyncio.Event()

    def plan(self, run: PodRun) -> str | dict[str, str]:
        if run.generation == 2:
            self.replacements.add(run.seat)
        if self.replacements == set(SEATS) and self.operator is not None and not self.killed.is_set():
            pid = self.operator.proc.pid
            raw = Path(f"/proc/{pid}/environ").read_bytes()
            self.env = dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)
            self.argv = [str(a) for a in self.operator.proc.args]  # type: ignore[union-attr]
            os.kill(pid, signal.SIGKILL)
            self.operator.proc.wait(10)
            self.killed.set()
        return {}


@pytest.mark.timeout(900)
async def test_replacements_restore_through_an_operator_restart(tmp_path: Path) -> None:
    requires_control_plane()
    procs = Processes()
    said: list[str] = []
    workdir = tmp_path / "work"
    workdir.mkdir()
    killer = Killer()
    try:
        stack = await asyncio.to_thread(start_stack, workdir, procs, said.append, control_plane=True)
        killer.operator = next(c for c in procs.children if c.name == "operator")
        repo = demo_repository(workdir / "demo-app")
        env = env_for_workers(fake_harness_bin(), workdir / "node" / "attempts", {PROJECT: str(repo)})
        kubelet = SimulatedKubelet(
            stack.kube.pod_api(), workdir / "node", env, plan=killer.plan, say=said.append
        )
        await kubelet.start()
        w = World(stack, kubelet, SWARM, say=said.append)
        try:
            await w.create_swarm(spec())
            firsts = {s: await w.run_of(s, 1) for s in SEATS}
            captured = {s: await w.captured(run, native=True) for s, run in firsts.items()}
            for run in firsts.values():
                await kubelet.oom_kill(run)
            await asyncio.wait_for(killer.killed.wait(), 120)  # killed as the last replacement starts
            seconds = [await w.run_of(s, 2) for s in SEATS]
            await asyncio.sleep(RESTART_AFTER_S)
            for run in seconds:  # still restoring: retrying while the controller is away
                assert run.proc is not None and run.proc.returncode is None, run.events()
                assert run.event("restore_refused") is None and run.event("boot_failed") is None
            procs.start("operator", killer.argv, env=killer.env, log=workdir / "logs" / "operator-2.log")
            for s, run in zip(SEATS, seconds, strict=True):
                line = await w.worker_event(run, "restore_verified", "restore_refused", "boot_failed")
                assert line["event"] == "restore_verified", (s, run.events())
                assert line["recovery"] == "native" and line["checkpoint_id"] == captured[s]["checkpoint_id"]
                card = await w.card(s, continuity="native")
                assert card["successor"] == run.execution_id and card["outcome"]["status"] == "verified"
            await asyncio.sleep(2)
            for s in SEATS:
                assert [r.generation for r in kubelet.runs(s)] == [1, 2]
        finally:
            await kubelet.stop()
    finally:
        await asyncio.to_thread(procs.stop_all)
