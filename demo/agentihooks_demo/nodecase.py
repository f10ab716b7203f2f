"""A seat on a real node: the project's worker image, killed by the kernel, resumed natively.

``make evidence`` (when this machine can host a real node) and ``make demo DEMO_ARGS=--real-node``
run it on the stack's own control plane, with one real node beside it (:mod:`.nodehost`) and the
worker image ``scripts/images.sh`` builds here. Nothing in the case is simulated: the real Claude
Code in the first container holds a conversation with a model API served on the node address
(scripted replies: the only fake part, named in the record), the worker captures its session
through the operator's control API, an endless reply grows the CLI past its container's memory
limit and the kernel's memory cgroup kills it, the operator fences ``oom_killed`` and resumes it
natively with no decision, and the replacement container verifies and restores the checkpoint
before ``claude --resume`` sends a request that carries the earlier turns.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .cases import Case
from .model_api import HOLD, Flood, Hold, ModelApi, Reply, ToolCall
from .nodecases import store_object
from .nodehost import RealNodeHook, git_daemon, node_reason, node_support
from .nodeseat import EXE, SeatOnNode, until
from .realresume import DUMMY_ANTHROPIC_KEY
from .stack import Stack, StackError

SWARM = "on-node"
NODE_CASE_ID = "real-node-native-resume"
SEAT = "node-1"
FIRST_TURN = "list what this seat was asked to do"


def node_spec(worker_ref: str, git_url: str, template: dict[str, Any]) -> dict[str, Any]:
    env = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "AGENTIHOOKS_CAPTURE_INTERVAL_SECONDS": "0.5"}
    return {
        "image": worker_ref,
        "harness": {
            "name": "claude",
            "command": ["claude", "-p", FIRST_TURN],
            "credentials": {"secretName": "node-model-account"},
        },
        "seats": [
            {
                "name": SEAT,
                "project": "local:app",
                "repository": git_url,
                "task": {"id": "t-node", "text": "Port the parser, on a real node"},
            }
        ],
        "recovery": {"automation": True, "passIntervalSeconds": 0.5},
        "checkpointStore": {"remote": True},
        "podTemplate": {
            "spec": {
                **template,
                "terminationGracePeriodSeconds": 3,
                "container": {
                    "imagePullPolicy": "Never",
                    "env": [{"name": k, "value": v} for k, v in env.items()],
                    "resources": {
                        "requests": {"cpu": "10m", "memory": "700Mi"},
                        "limits": {"memory": "700Mi"},
                    },
                },
            }
        },
    }


async def node_case(
    stack: Stack,
    node: Any,
    worker_ref: str,
    workdir: Path,
    step: Callable[[str], None],
    *,
    meanwhile: Callable[[Case], None] | None = None,
    case_id: str = NODE_CASE_ID,
) -> Case:
    """The case, run on ``node`` with the stack's operator; what it observed, ready for the record.

    ``meanwhile`` runs while the replacement still runs (the demo prints the seat's status then).
    The Swarm's recovery is paused before the model API stops: the replacement's held request then
    fails and its harness exits, and that failure waits for a decision instead of a third Pod."""
    realnode = node_support()
    host = realnode.NODE_IP
    case = Case(
        case_id,
        "The worker image on a real node: the kernel kills it, the replacement resumes natively",
        {
            "first_container": "OOMKilled",
            "fence_reason": "oom_killed",
            "decided_by": "automatic",
            "continuity": "native",
            "turns_carried": True,
            "replacements_admitted": 1,
        },
    )
    case.ran_on = "real node"
    run = SeatOnNode(stack, node, SWARM, SEAT)
    release = threading.Event()
    script: list[Reply | Flood | Hold] = [
        Reply("ack 1", ToolCall("Read", {"file_path": "/etc/hostname"})),
        Flood(release),
        HOLD,
    ]
    with ModelApi(script, host=host) as api, git_daemon(workdir / "node-git", host) as git_url:
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            # lent to the namespace's Swarms by its owner (docs/security.md)
            "metadata": {
                "name": "node-model-account",
                "labels": {"swarm.agentihooks.io/pod-template": "allowed"},
            },
            "stringData": {"ANTHROPIC_API_KEY": DUMMY_ANTHROPIC_KEY, "ANTHROPIC_BASE_URL": api.base_url},
        }
        spec = node_spec(worker_ref, git_url, realnode.POD_TEMPLATE)
        swarm = {
            "apiVersion": "agentihooks.io/v1alpha1",
            "kind": "Swarm",
            "metadata": {"name": SWARM},
            "spec": spec,
        }
        with run.http() as c:
            c.post(f"/api/v1/namespaces/{run.ns}/secrets", json=secret).raise_for_status()
            made = c.post(f"/apis/agentihooks.io/v1alpha1/namespaces/{run.ns}/swarms", json=swarm)
            made.raise_for_status()
        case.add_input("Swarm spec (JSON)", json.dumps(spec, sort_keys=True).encode(), image=worker_ref)
        step(f"Swarm '{SWARM}' on the real node: image {worker_ref}, 700Mi memory limit, real Claude Code")
        first = await until(lambda: run.pod_of(1), "the first attempt's Pod")
        name1 = first["metadata"]["name"]
        step(f"{name1} scheduled onto {realnode.NODE_NAME}; Claude Code talks to the model API at {host}")
        checkpoint = await until(
            lambda: run.native_checkpoint(any(q.held for q in api.snapshot())),
            "a native checkpoint of attempt 1",
        )
        manifest, _, _ = store_object(stack, SWARM, str(checkpoint["checkpoint_id"]), task="t-node")
        case.add_input("checkpoint record (manifest)", manifest, **_ids(checkpoint))
        step(
            f"the worker captured Claude Code's session ({checkpoint['checkpoint_id']}); now an endless reply"
        )
        found: dict[str, Any] = {}
        watcher = threading.Thread(target=run.watch_end, args=(name1, found), daemon=True)
        watcher.start()
        release.set()
        try:
            ended = await until(lambda: dict(found) or None, "the first container's end")
        except StackError as e:
            raise StackError(f"{e}\n{await asyncio.to_thread(run.diagnosis, name1)}") from e
        case.observed["first_container"] = ended.get("reason")
        step(f"the kernel ended {name1}: {ended.get('reason')} (exit {ended.get('exitCode')})")
        second = await until(lambda: run.pod_of(2), "the replacement's Pod")
        name2 = second["metadata"]["name"]
        card = await until(lambda: run.card(continuity="native"), "the replacement's reported continuity")
        case.observed["continuity"] = card.get("continuity")
        fence, decision = await asyncio.to_thread(run.records, first["metadata"]["labels"][EXE])
        case.observed["fence_reason"] = fence.get("reason")
        case.observed["released"] = fence.get("released")
        case.observed["decided_by"] = (
            "automatic" if decision.get("decided_by") == "automation" else decision.get("decided_by")
        )
        verified = await until(
            lambda: run.events(name2, "restore_verified"), "restore_verified in the replacement's log"
        )
        case.observed["worker_line"] = {
            k: verified[0].get(k) for k in ("event", "recovery", "checkpoint_id", "execution_id")
        }
        resumed = await until(
            lambda: next((q for q in api.snapshot() if q.held and "ack 1" in q.text), None),
            "the resumed request",
        )
        case.observed["turns_carried"] = FIRST_TURN in resumed.text and "ack 1" in resumed.text
        step(
            f"{name2} verified {verified[0].get('checkpoint_id')} and resumed natively; its first request "
            "carried the earlier turns"
        )
        await asyncio.sleep(2.0)  # a few more passes: a second replacement would show now
        creates = await asyncio.to_thread(run.creates)
        case.observed["pods_created"] = sorted(creates)
        case.observed["replacements_admitted"] = len(creates) - 1
        if meanwhile is not None:
            meanwhile(case)
        await asyncio.to_thread(stack.cli, "swarm", SWARM, "pause")
    return case


def _ids(row: dict[str, Any]) -> dict[str, Any]:
    return {k: row[k] for k in ("checkpoint_id", "execution_id") if k in row}


async def node_demo(workdir: Path, procs: Any, say: Callable[[str], None], *, check: bool) -> int:
    """``make demo DEMO_ARGS=--real-node``: the same seat's story, told as it happens."""
    import time

    from .stack import start_stack

    reason = node_reason()
    if reason is not None:
        raise StackError(f"--real-node: this machine cannot host a real node: {reason}")
    hook = RealNodeHook(say)
    try:
        stack = await asyncio.to_thread(start_stack, workdir, procs, say, control_plane=True, node=hook)
        began = time.monotonic()

        def step(text: str) -> None:
            say(f"[{time.monotonic() - began:5.1f}s] {text}")

        def status(_: Case) -> None:
            say(f"\n== agentihooks swarm {SWARM} status")
            say(stack.cli("swarm", SWARM, "status").stdout.rstrip())

        case = await node_case(stack, hook.node, hook.worker_ref, workdir, step, meanwhile=status)
        say("\n== what the run observed")
        for key, value in case.observed.items():
            mark = "" if key not in case.expected else " (ok)" if case.expected[key] == value else " (WRONG)"
            say(f"  {key}: {value}{mark}")
        say(f"\nContainer logs: {workdir / 'logs' / 'pods'} (copied from the node before it is torn down)")
        say(f"Operator log: {workdir / 'logs' / 'operator.log'}")
        if check and not case.passed:
            wrong = {k: case.observed.get(k) for k, v in case.expected.items() if case.observed.get(k) != v}
            raise StackError(f"the real-node story did not go as promised: {wrong}")
        if check:
            say("demo --ci: every outcome of the real-node story checked")
        return 0
    finally:
        await asyncio.to_thread(hook.down, workdir / "logs" / "pods")
