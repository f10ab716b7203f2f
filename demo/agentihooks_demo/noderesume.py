"""Acceptance cases on the real node that end in a native resume: a duplicated request, a container kill.

Each runs a Swarm of one seat on the real node (:class:`.nodecases.NodeBed`):

* ``duplicated-restore-request`` - the worker image's name is taken off the node (as a garbage
  collection would; the running container is untouched) and the first container is OOM-killed; the
  automatic replacement's Pod cannot get its image (``ErrImageNeverPull``) and the seat waits; the
  image is put back and the same resume is posted three times (once, then twice at once): one
  replacement, which resumes natively;
* ``real-node-codex-container-kill`` - every process of a Codex seat's container is SIGKILLed at once
  (``ctr tasks kill --all``: what a crashed node leaves of it); the controller resumes it natively on
  its own and the replacement's first request carries the earlier turns.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from .cases import Case
from .model_api import HOLD, Reply, ScriptEntry, ToolCall
from .nodecases import (
    NodeBed,
    captured,
    claude_script,
    execution_of,
    first_request,
    kill_by_memory,
    manifest_input,
    settle,
    turns_carried,
)
from .nodeseat import until
from .stack import StackError

CODEX_CASE_ID = "real-node-codex-container-kill"
#: How the kubelet says a container's image could not be had (the operator's ``image_pull``).
PULL_FAILURES = frozenset({"ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff"})


async def duplicate_case(bed: NodeBed) -> Case:
    swarm = "ev-duplicate"
    case = Case(
        "duplicated-restore-request",
        "The same resume request posted three times (once, then twice at once) (real node, real Claude Code)",
        {
            "pull_failure": "ErrImageNeverPull",
            "continuity": "native",
            "replacements_admitted": 1,
            "distinct_replacements_answered": 1,
            "accepted_answers": 3,
        },
    )
    run = bed.seat(swarm)
    release = threading.Event()
    async with bed.seat_case(case, swarm, "claude", claude_script(release), spec_input=False) as api:
        first, row = await captured(bed, run, api)
        manifest_input(bed, case, swarm, row)
        await asyncio.to_thread(bed.hide_image, True)
        bed.step(f"the node no longer has {bed.worker_ref} (its running container is untouched)")
        await kill_by_memory(bed, run, first, release, case)
        case.observed["pull_failure"] = await until(
            lambda: run.waiting_reason(2) if run.waiting_reason(2) in PULL_FAILURES else None,
            "the replacement's pull failure",
        )
        second = await until(lambda: run.pod_of(2), "attempt 2's Pod")
        exe2 = execution_of(second)
        await until(lambda: run.card(binding="awaiting decision", execution_id=exe2), "the seat waiting")
        await asyncio.to_thread(bed.hide_image, False)  # the image is back on the node
        before = len(await asyncio.to_thread(run.creates))
        body = json.dumps({"choice": "resume", "agent": "operator"}).encode()
        case.add_input("restore-decision request body (posted 3 times)", body)
        path = f"/v1/executions/{exe2}/restore-decision"
        headers = {"Content-Type": "application/json"}
        async with bed.stack.api() as http:
            answers = [await http.post(path, content=body, headers=headers)]
            answers += await asyncio.gather(
                *(http.post(path, content=body, headers=headers) for _ in range(2))
            )
        replies = [(a.status_code, _json(a)) for a in answers]
        case.observed["answers"] = [
            {"status": s, "replacement": b.get("replacement"), "replayed": b.get("replayed")}
            for s, b in replies
        ]
        case.observed["accepted_answers"] = sum(1 for s, _ in replies if s == 200)
        case.observed["distinct_replacements_answered"] = len(
            {b.get("replacement") for s, b in replies if s < 300 and b.get("replacement")}
        )
        third = await until(lambda: run.pod_of(3), "the replacement's Pod")
        name3 = third["metadata"]["name"]
        line = (await until(lambda: run.events(name3, "restore_verified"), "restore_verified"))[0]
        case.observed["continuity"] = line.get("recovery")
        case.observed["worker_line"] = {k: line.get(k) for k in ("event", "recovery", "checkpoint_id")}
        resumed = await until(lambda: first_request(api, execution_of(third)), "the resumed request")
        case.observed["turns_carried"] = turns_carried(resumed)
        await settle()
        case.observed["replacements_admitted"] = len(await asyncio.to_thread(run.creates)) - before
        bed.step(f"three posts, one replacement: {name3} resumed natively")
    return case


async def codex_case(bed: NodeBed) -> Case:
    swarm = "ev-codex"
    case = Case(
        CODEX_CASE_ID,
        "Every process of a Codex seat's container SIGKILLed at once (real node, real Codex)",
        {
            "fence_reason": "application_exit",
            "decided_by": "automation",
            "continuity": "native",
            "turns_carried": True,
            "replacements_admitted": 1,
        },
    )
    run = bed.seat(swarm)
    script: list[ScriptEntry] = [Reply("ack 1", ToolCall("get_goal", {})), HOLD, HOLD]
    async with bed.seat_case(case, swarm, "codex", script, memory="1Gi") as api:
        first, row = await captured(bed, run, api)
        exe1 = execution_of(first)
        manifest_input(bed, case, swarm, row)
        cid = await until(lambda: _container_id(run.pod_of(1)), "the first container's id")
        done = await asyncio.to_thread(bed.node.ctr, "tasks", "kill", "--all", "--signal", "SIGKILL", cid)
        if done.returncode != 0:
            raise StackError(f"ctr tasks kill failed: {done.stderr.strip()}")
        bed.step(f"every process of {first['metadata']['name']} SIGKILLed at once")
        fence = await until(lambda: run.records(exe1)[0] or None, "the fence")
        case.observed["fence_reason"] = fence.get("reason")
        # the attempt had reported its session and captured it: resumed natively with no decision
        decision = await until(lambda: run.records(exe1)[1] or None, "the decision")
        case.observed["decided_by"] = decision.get("decided_by")
        before = 1  # attempt 1's Pod
        second = await until(lambda: run.pod_of(2), "the replacement's Pod")
        name2 = second["metadata"]["name"]
        line = (await until(lambda: run.events(name2, "restore_verified"), "restore_verified"))[0]
        case.observed["continuity"] = line.get("recovery")
        case.observed["worker_line"] = {k: line.get(k) for k in ("event", "recovery", "checkpoint_id")}
        resumed = await until(lambda: first_request(api, execution_of(second)), "the resumed request")
        case.observed["turns_carried"] = turns_carried(resumed)
        await settle()
        case.observed["replacements_admitted"] = len(await asyncio.to_thread(run.creates)) - before
        bed.step(f"{name2} resumed Codex natively; its first request carried the earlier turns")
    return case


def _container_id(pod: dict[str, Any] | None) -> str | None:
    statuses = ((pod or {}).get("status") or {}).get("containerStatuses") or []
    found = statuses[0].get("containerID") if statuses else None
    return str(found).removeprefix("containerd://") if found else None


def _json(response: Any) -> dict[str, Any]:
    try:
        return dict(response.json())
    except ValueError:
        return {}
