"""Fix the cause and relaunch, on the real control plane with the real operator and real workers.

The demo's system (:mod:`agentihooks_demo.stack` with ``control_plane``): a
private redis-server, real etcd + kube-apiserver + kube-controller-manager
with the chart's CRD and RBAC, the real operator and its control API as a
process, and the simulated kubelet running every Pod as a real
``agentihooks-worker boot`` process (``checkpoint_remote``).

The seat's first attempt captures a native checkpoint with Claude Code 2.1.332
and is OOM-killed; the operator resumes it natively without asking. The
replacement's image has Claude Code 2.1.400 under the same tag (its content
changed): it refuses ``version_changed``, reports the refusal and exits 64.
The operator fences nothing for that exit and launches nothing new; the card
says ``restore refused: version_changed``. The Swarm's image is set to a tag
that carries 2.1.332 and ``agentihooks swarm NAME relaunch SEAT`` (the real
CLI against the control API) launches the same directive as generation 3,
whose worker restores natively from the first attempt's checkpoint. Exactly
three Pods were created for the seat and one attempt was fenced.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from agentihooks_demo.cases import PROJECT
from agentihooks_demo.containers import env_for_workers
from agentihooks_demo.harness import fake_harness_bin
from agentihooks_demo.kubelet import PodRun, SimulatedKubelet
from agentihooks_demo.procs import Processes
from agentihooks_demo.stack import demo_repository, start_stack
from agentihooks_demo.world import World

from .conftest import requires_control_plane

pytestmark = pytest.mark.slow

SWARM = "relaunch"
CHANGED = "2.1.400 (Claude Code)"
FIXED_IMAGE = "ghcr.io/agentihooks/worker:2.1.0-r2"
MERGE = {"Content-Type": "application/merge-patch+json"}


def spec() -> dict[str, Any]:
    return {
        "image": "ghcr.io/agentihooks/worker:2.1.0",
        "harness": {"name": "claude", "command": ["claude", "-p", "Work on your task"]},
        "seats": [{"name": "eng-1", "project": PROJECT, "task": {"id": "t-eng-1", "text": "Relaunch case"}}],
        "recovery": {"automation": True, "imagePullGraceSeconds": 2, "passIntervalSeconds": 0.5},
        "checkpointStore": {"remote": True},
    }


def plan(run: PodRun) -> str | dict[str, str]:
    """Generation 2 runs the old tag whose content changed: another Claude Code 2.1."""
    if run.generation == 2 and not run.image.endswith("-r2"):
        return {"FAKE_CLAUDE_VERSION": CHANGED}
    return {}


@pytest.mark.timeout(900)
async def test_a_refused_restore_is_relaunched_after_the_image_is_fixed(tmp_path: Path) -> None:
    requires_control_plane()
    procs = Processes()
    said: list[str] = []
    workdir = tmp_path / "work"
    workdir.mkdir()
    try:
        stack = await asyncio.to_thread(start_stack, workdir, procs, said.append, control_plane=True)
        repo = demo_repository(workdir / "demo-app")
        env = env_for_workers(fake_harness_bin(), workdir / "node" / "attempts", {PROJECT: str(repo)})
        kubelet = SimulatedKubelet(stack.kube.pod_api(), workdir / "node", env, plan=plan, say=said.append)
        await kubelet.start()
        w = World(stack, kubelet, SWARM, say=said.append)
        try:
            await w.create_swarm(spec())
            first = await w.run_of("eng-1", 1)
            await w.captured(first, native=True)
            await kubelet.oom_kill(first)

            second = await w.run_of("eng-1", 2)
            refused = await w.worker_event(second, "restore_refused", "restore_verified")
            assert refused["event"] == "restore_refused" and refused["reason"] == "version_changed"
            assert await w.worker_event(second, "refusal_reported", "refusal_report_failed") == {
                "event": "refusal_reported",
                "execution_id": second.execution_id,
                "reason": "version_changed",
            }
            await w.until(lambda: second.reported, "the refused Pod's exit 64 reported to the API")
            await asyncio.sleep(3)  # several passes see the exit
            card = await w.card("eng-1", successor=second.execution_id)
            assert card["reason"].endswith("restore refused: version_changed"), card
            assert card["restore_refused"]["reason"] == "version_changed"
            assert card["binding"] == "bound" and card["continuity"] == "pending"
            assert [r.generation for r in kubelet.runs("eng-1")] == [1, 2]  # nothing new launched
            status = (await w.status())["seats"][0]
            assert status["execution_id"] == second.execution_id  # not fenced: still the seat's attempt

            # Fix the cause: a tag with the captured harness version; then relaunch with the CLI.
            path = f"/apis/agentihooks.io/v1alpha1/namespaces/{kubelet.namespace}/swarms/{SWARM}"
            r = await kubelet.http.patch(path, json={"spec": {"image": FIXED_IMAGE}}, headers=MERGE)
            assert r.status_code == 200, r.text

            async def relaunched() -> str | None:
                done = await asyncio.to_thread(stack.cli, "swarm", SWARM, "relaunch", "eng-1")
                if done.returncode == 0:
                    return done.stdout
                assert "not_leader" in done.stderr or "503" in done.stderr, done.stderr
                return None

            out = await w.until(relaunched, "the relaunch")
            assert out.startswith("relaunched: seat eng-1:"), out
            third = await w.run_of("eng-1", 3)
            assert third.image == FIXED_IMAGE
            verified = await w.worker_event(third, "restore_verified", "restore_refused")
            assert verified["event"] == "restore_verified" and verified["recovery"] == "native", verified
            card = await w.card("eng-1", continuity="native")
            assert card["successor"] == third.execution_id and card["relaunches"] == 1
            assert card["restore_refused"] is None
            again = await asyncio.to_thread(stack.cli, "swarm", SWARM, "relaunch", "eng-1")
            assert again.returncode == 0 and again.stdout.startswith("already relaunched:"), again.stderr
            await asyncio.sleep(2)
            assert [r.generation for r in kubelet.runs("eng-1")] == [1, 2, 3]
            async with stack.api() as api:
                listed = (await api.get(f"/v1/swarms/{SWARM}/events", params={"count": 1000})).json()
            fences = [e for e in listed["events"] if e["type"] == "fence"]
            assert [e["execution_id"] for e in fences] == [first.execution_id]
        finally:
            await kubelet.stop()
    finally:
        await asyncio.to_thread(procs.stop_all)
