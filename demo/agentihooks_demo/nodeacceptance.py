"""Acceptance cases on the real node: a corrupt object, another harness version, a duplicated request, a kill.

Each runs a Swarm of one seat on the real node (:class:`.nodecases.NodeBed`) and makes its case
happen as it happens in a cluster:

* ``corrupt-object`` - the kernel OOM-kills the first container while the node is cordoned, so the
  admitted replacement waits unscheduled; one bit of the newest transcript object of the checkpoint it
  will restore is flipped in the store; the node is uncordoned and the replacement's worker refuses
  the checkpoint (``corrupt_object``); the seat then waits for a decision;
* ``duplicated-restore-request`` - the worker image's name is taken off the node (as a garbage
  collection would; the running container is untouched) and the first container is OOM-killed; the
  automatic replacement's Pod cannot get its image (``ErrImageNeverPull``) and the seat waits; the
  image is put back and the same resume is posted three times (once, then twice at once): one
  replacement, which resumes natively;
* ``unsupported-harness-version`` - once attempt 1 captured, the worker image's tag is loaded again with
  another Claude Code (2.0, outside the qualified 2.1 series: what pushing a tag again does; the
  running container keeps its image) and the container is OOM-killed; the automatic replacement's
  worker reads the CLI's version and refuses ``unqualified_version`` before it starts;
* ``real-node-codex-container-kill`` - every process of a Codex seat's container is SIGKILLed at once
  (``ctr tasks kill --all``: what a crashed node leaves of it); the controller resumes it natively on
  its own and the replacement's first request carries the earlier turns.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

from .cases import Case
from .model_api import HOLD, ModelApi, Reply, ScriptEntry, ToolCall
from .nodecases import (
    NodeBed,
    captured,
    claude_script,
    execution_of,
    first_request,
    kill_by_memory,
    newest_of,
    settle,
    store_object,
    turns_carried,
)
from .nodeseat import until
from .stack import StackError

CODEX_CASE_ID = "real-node-codex-container-kill"
#: How the kubelet says a container's image could not be had (the operator's ``image_pull``).
PULL_FAILURES = frozenset({"ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff"})


async def corrupt_case(bed: NodeBed) -> Case:
    swarm = "ev-corrupt"
    case = Case(
        "corrupt-object",
        "A checkpoint object whose bytes changed (real node, real Claude Code)",
        {"first_container": "OOMKilled", "refusal": "corrupt_object", "replacements_admitted": 1},
    )
    case.ran_on = "real node"
    run = bed.seat(swarm)
    release = threading.Event()
    with ModelApi(claude_script(release), host=bed.host) as api:
        spec = bed.spec(swarm, "claude")
        await asyncio.to_thread(bed.create, swarm, spec, api)
        case.add_input("Swarm spec (JSON)", json.dumps(spec, sort_keys=True).encode(), image=bed.worker_ref)
        try:
            first, _ = await captured(bed, run, api)
            exe1 = execution_of(first)
            # the replacement the controller admits must wait unscheduled while the object changes
            await asyncio.to_thread(bed.cordon, True)
            try:
                await kill_by_memory(bed, run, first, release, case)
                second = await until(lambda: run.pod_of(2), "the replacement's Pod (unscheduled)")
                newest = await asyncio.to_thread(newest_of, run, exe1)
                if newest is None:
                    raise StackError(f"attempt {exe1} committed no checkpoint")
                data, obj, digest = store_object(bed.stack, swarm, newest["checkpoint_id"])
                body = bytearray(obj.read_bytes())
                body[len(body) // 2] ^= 0x01  # same size, one bit different
                obj.write_bytes(bytes(body))
                case.add_input("checkpoint record (manifest)", data, checkpoint_id=newest["checkpoint_id"])
                case.add_input(
                    "transcript object after one bit was flipped", bytes(body), recorded_sha256=digest
                )
                bed.step(f"one bit of {newest['checkpoint_id']}'s transcript flipped; uncordoning the node")
            finally:
                await asyncio.to_thread(bed.cordon, False)
            name2 = second["metadata"]["name"]
            line = (await until(lambda: run.events(name2, "restore_refused"), "the replacement's refusal"))[0]
            case.observed["refusal"] = line.get("reason")
            case.observed["worker_line"] = {k: line.get(k) for k in ("event", "reason", "checkpoint_id")}
            card = await until(lambda: _refusal_on_card(run), "the refusal on the seat's card")
            refused = card.get("restore_refused") or {}
            # the seat waits for a relaunch (or a fresh one), naming the checkpoint that verifies now
            case.observed["card_after_refusal"] = {
                "binding": card.get("binding"),
                "awaiting": card.get("awaiting"),
                "refusal": refused.get("reason"),
                "offered_checkpoint": refused.get("offered_checkpoint"),
            }
            await settle()
            case.observed["replacements_admitted"] = len(await asyncio.to_thread(run.creates)) - 1
            bed.step(f"{name2} refused the checkpoint: {line.get('reason')}; the seat waits for a relaunch")
        finally:
            await bed.remove(swarm)
    return case


async def version_case(bed: NodeBed, other: Path, version: str) -> Case:
    swarm = "ev-version"
    case = Case(
        "unsupported-harness-version",
        f"The replacement's harness is not qualified for native resume (real node: Claude Code {version})",
        {"first_container": "OOMKilled", "refusal": "unqualified_version", "replacements_admitted": 1},
    )
    case.ran_on = "real node"
    run = bed.seat(swarm)
    release = threading.Event()
    with ModelApi(claude_script(release), host=bed.host) as api:
        spec = bed.spec(swarm, "claude")
        await asyncio.to_thread(bed.create, swarm, spec, api)
        case.add_input("Swarm spec (JSON)", json.dumps(spec, sort_keys=True).encode(), image=bed.worker_ref)
        try:
            first, row = await captured(bed, run, api)
            _manifest_input(bed, case, swarm, row)
            # the image's tag is pushed again with another Claude Code; attempt 1 runs on, unchanged
            await asyncio.to_thread(bed.swap_image, other)
            case.add_input(f"the image under the same tag, with Claude Code {version}", other.name.encode())
            bed.step(
                f"{bed.worker_ref} now holds Claude Code {version} (the running container keeps its own)"
            )
            try:
                await kill_by_memory(bed, run, first, release, case)
                second = await until(lambda: run.pod_of(2), "the replacement's Pod")
                name2 = second["metadata"]["name"]
                line = (await until(lambda: run.events(name2, "restore_refused"), "the refusal"))[0]
            finally:
                await asyncio.to_thread(bed.swap_image, None)
            case.observed["refusal"] = line.get("reason")
            case.observed["worker_line"] = {k: line.get(k) for k in ("event", "reason", "detail")}
            await settle()
            case.observed["replacements_admitted"] = len(await asyncio.to_thread(run.creates)) - 1
            bed.step(f"{name2} refused: {line.get('reason')} ({line.get('detail')})")
        finally:
            await bed.remove(swarm)
    return case


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
    case.ran_on = "real node"
    run = bed.seat(swarm)
    release = threading.Event()
    with ModelApi(claude_script(release), host=bed.host) as api:
        spec = bed.spec(swarm, "claude")
        await asyncio.to_thread(bed.create, swarm, spec, api)
        try:
            first, row = await captured(bed, run, api)
            _manifest_input(bed, case, swarm, row)
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
        finally:
            await bed.remove(swarm)
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
    case.ran_on = "real node"
    run = bed.seat(swarm)
    script: list[ScriptEntry] = [Reply("ack 1", ToolCall("get_goal", {})), HOLD, HOLD]
    with ModelApi(script, host=bed.host) as api:
        spec = bed.spec(swarm, "codex", memory="1Gi")
        await asyncio.to_thread(bed.create, swarm, spec, api)
        case.add_input("Swarm spec (JSON)", json.dumps(spec, sort_keys=True).encode(), image=bed.worker_ref)
        try:
            first, row = await captured(bed, run, api)
            exe1 = execution_of(first)
            _manifest_input(bed, case, swarm, row)
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
        finally:
            await bed.remove(swarm)
    return case


def _manifest_input(bed: NodeBed, case: Case, swarm: str, row: dict[str, Any]) -> None:
    """The checkpoint attempt 1 captured, as its manifest's bytes in the store (hashed in the record)."""
    data, _, _ = store_object(bed.stack, swarm, str(row["checkpoint_id"]))
    case.add_input("checkpoint record (manifest)", data, **_ids(row))


def _container_id(pod: dict[str, Any] | None) -> str | None:
    statuses = ((pod or {}).get("status") or {}).get("containerStatuses") or []
    found = statuses[0].get("containerID") if statuses else None
    return str(found).removeprefix("containerd://") if found else None


def _refusal_on_card(run: Any) -> dict[str, Any] | None:
    card = run.card()
    return card if card and (card.get("restore_refused") or {}).get("reason") else None


def _ids(row: dict[str, Any]) -> dict[str, Any]:
    return {k: row[k] for k in ("checkpoint_id", "execution_id") if k in row}


def _json(response: Any) -> dict[str, Any]:
    try:
        return dict(response.json())
    except ValueError:
        return {}
