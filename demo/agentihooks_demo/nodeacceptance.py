"""Acceptance cases on the real node that end in a refusal: a corrupt object, another harness version.

Each runs a Swarm of one seat on the real node (:class:`.nodecases.NodeBed`) and makes its case
happen as it happens in a cluster:

* ``corrupt-object`` - the kernel OOM-kills the first container while the node is cordoned, so the
  admitted replacement waits unscheduled; one bit of the newest transcript object of the checkpoint it
  will restore is flipped in the store; the node is uncordoned and the replacement's worker refuses
  the checkpoint (``corrupt_object``); the seat then waits for a relaunch;
* ``unsupported-harness-version`` - once attempt 1 captured, the worker image's tag is loaded again with
  another Claude Code (2.0, outside the qualified 2.1 series: what pushing a tag again does; the
  running container keeps its image) and the container is OOM-killed; the automatic replacement's
  worker reads the CLI's version and refuses ``unqualified_version`` before it starts.

The cases that end in a native resume are in :mod:`.noderesume`.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from .cases import Case
from .nodecases import (
    NodeBed,
    captured,
    claude_script,
    execution_of,
    kill_by_memory,
    manifest_input,
    newest_of,
    settle,
    store_object,
)
from .nodeseat import until
from .stack import StackError


async def corrupt_case(bed: NodeBed) -> Case:
    swarm = "ev-corrupt"
    case = Case(
        "corrupt-object",
        "A checkpoint object whose bytes changed (real node, real Claude Code)",
        {"first_container": "OOMKilled", "refusal": "corrupt_object", "replacements_admitted": 1},
    )
    run = bed.seat(swarm)
    release = threading.Event()
    async with bed.seat_case(case, swarm, "claude", claude_script(release)) as api:
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
            case.add_input("transcript object after one bit was flipped", bytes(body), recorded_sha256=digest)
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
    return case


async def version_case(bed: NodeBed, other: Path, version: str) -> Case:
    swarm = "ev-version"
    case = Case(
        "unsupported-harness-version",
        f"The replacement's harness is not qualified for native resume (real node: Claude Code {version})",
        {"first_container": "OOMKilled", "refusal": "unqualified_version", "replacements_admitted": 1},
    )
    run = bed.seat(swarm)
    release = threading.Event()
    async with bed.seat_case(case, swarm, "claude", claude_script(release)) as api:
        first, row = await captured(bed, run, api)
        manifest_input(bed, case, swarm, row)
        # the image's tag is pushed again with another Claude Code; attempt 1 runs on, unchanged
        await asyncio.to_thread(bed.swap_image, other)
        case.add_input(f"the image under the same tag, with Claude Code {version}", other.name.encode())
        bed.step(f"{bed.worker_ref} now holds Claude Code {version} (the running container keeps its own)")
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
    return case


def _refusal_on_card(run: Any) -> dict[str, Any] | None:
    card = run.card()
    return card if card and (card.get("restore_refused") or {}).get("reason") else None
