"""``make evidence``: the acceptance cases of SV2-CKP-05 run live, and the evidence record they produce.

Five acceptance cases, on the same running system as ``make demo DEMO_ARGS=--control-plane``
(private redis-server, a real etcd + kube-apiserver + kube-controller-manager on loopback with the
chart's CRD and RBAC, the real operator and control API as the chart's ServiceAccount):

* ``valid`` - a checkpoint its worker captured; OOM-killed; resumes natively.
* ``corrupt`` - one object of the checkpoint the replacement will restore has a bit flipped; the
  replacement refuses ``corrupt_object``.
* ``version`` - the replacement's harness is Claude Code 2.2, not qualified for native resume; it
  refuses ``unqualified_version``.
* ``mismatch`` - the attempt reported another conversation after its last capture; the controller
  does not resume it natively (the card offers "Continue from context"), and resume reconstructs.
* ``duplicate`` - waits after an image-pull failure; the same resume request is posted three times
  (once, then twice at once); one replacement, native.

Where this machine can host a real node (root, a memory cgroup, containerd and runc), ``valid``,
``corrupt``, ``version`` and ``duplicate`` run there (:mod:`.nodecase`, :mod:`.nodeacceptance`,
:mod:`.noderesume`): the project's worker image on a real kubelet with the real Claude Code, the
kernel's OOM kill, a cordoned node, the image's tag loaded again with Claude Code 2.0, a real
``ErrImageNeverPull``; a Codex seat whose whole container is SIGKILLed at once is added.
``mismatch``, and all five elsewhere, run under the simulated kubelet with real worker processes and
the fake harness (:mod:`.cases`); each case says where it ran (``ran_on``) and the record's
``mocked_parts`` names what was simulated in which case.

Then the real-harness cases (:mod:`agentihooks_demo.realcase`): Claude Code and Codex themselves, at
the pinned versions, hold a conversation against a loopback model API, are killed, and resume
natively in a replacement worker, at worker level (no operator); they are recorded ``skipped`` where
the CLIs are missing.

Each case records its inputs with their sha256, what was expected and what was observed
(continuity reported or refusal reason, replacements admitted). The record is written by
:mod:`agentihooks_demo.record`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .cases import PROJECT, SWARM, UNSUPPORTED_CLAUDE, Case, CaseRunner
from .containers import env_for_workers
from .harness import fake_harness_bin
from .kubelet import EARLIER_WORKER, PodRun, SimulatedKubelet
from .nodeacceptance import corrupt_case, version_case
from .nodecase import NODE_CASE_ID, node_case
from .nodecase import SWARM as NODE_SWARM
from .nodecases import NodeBed
from .nodehost import RealNodeHook, git_daemon, node_reason
from .noderesume import codex_case, duplicate_case
from .procs import Processes
from .realcase import harness_section, real_harness_case
from .realresume import HARNESSES
from .record import build_record, write_record
from .stack import StackError, demo_repository, start_stack
from .world import World

#: The five acceptance cases, in the order they run.
ACCEPTANCE = ("valid", "corrupt", "version", "mismatch", "duplicate")
#: The cases that run under the simulated kubelet even where a real node is at hand: a conversation
#: reported after the last capture needs a worker that dies between the two (the fake harness does it;
#: a real worker reports a session only with its capture); and the version case where the unqualified
#: Claude Code the tests install (scripts/install-deps.sh) is missing.
SIMULATED_ONLY = ("version", "mismatch")


def evidence_spec(names: tuple[str, ...] = ACCEPTANCE) -> dict[str, Any]:
    seats = [
        {"name": name, "project": PROJECT, "task": {"id": f"t-{name}", "text": f"Acceptance case {name}"}}
        for name in names
    ]
    return {
        "image": "ghcr.io/agentihooks/worker:2.1.0",
        "harness": {"name": "claude", "command": ["claude", "-p", "Work on your task"]},
        "seats": seats,
        "recovery": {"automation": True, "imagePullGraceSeconds": 2, "passIntervalSeconds": 0.5},
        "checkpointStore": {"remote": True},
    }


def evidence_plan(run: PodRun) -> str | dict[str, str]:
    if run.seat == "version" and run.generation == 2:
        return {"FAKE_CLAUDE_VERSION": UNSUPPORTED_CLAUDE}
    if run.seat == "mismatch" and run.generation == 1:  # the case posts a session report as this worker
        return {EARLIER_WORKER: "1"}
    return {}


async def run_evidence(
    out: Path,
    workdir: Path,
    procs: Processes,
    say: Callable[[str], None],
    *,
    real_node: bool | None = None,
) -> int:
    """``real_node``: ``None`` runs the real-node case where this machine can host a node (and records
    it skipped, with the reason, where it cannot); ``True`` requires it; ``False`` leaves it out."""
    started = _now()
    bin_dir = fake_harness_bin()
    hook: RealNodeHook | None = None
    node_skip: str | None = "not asked for (--no-real-node)" if real_node is False else None
    if real_node is not False:
        node_skip = node_reason()
        if node_skip is None:
            hook = RealNodeHook(say)
        elif real_node:
            raise StackError(f"--real-node: this machine cannot host a real node: {node_skip}")
    try:
        return await _run(
            out, workdir, procs, say, started=started, bin_dir=bin_dir, hook=hook, skip=node_skip
        )
    finally:
        if hook is not None:
            await asyncio.to_thread(hook.down, workdir / "logs" / "pods")


async def _run(
    out: Path,
    workdir: Path,
    procs: Processes,
    say: Callable[[str], None],
    *,
    started: str,
    bin_dir: Path,
    hook: RealNodeHook | None,
    skip: str | None,
) -> int:
    stack = await asyncio.to_thread(start_stack, workdir, procs, say, control_plane=True, node=hook)
    repo = demo_repository(workdir / "demo-app")
    env = env_for_workers(bin_dir, workdir / "node" / "attempts", {PROJECT: str(repo)})
    kubelet = SimulatedKubelet(stack.kube.pod_api(), workdir / "node", env, plan=evidence_plan, say=say)
    await kubelet.start()
    w = World(stack, kubelet, SWARM, say=say)
    other = await asyncio.to_thread(hook.other_claude) if hook is not None else None
    simulated = ACCEPTANCE if hook is None else SIMULATED_ONLY if other is None else ("mismatch",)
    found: dict[str, Case] = {}
    try:
        w.step(
            f"creating Swarm 'evidence' (a seat per case on the simulated kubelet: {', '.join(simulated)})"
        )
        await w.create_swarm(evidence_spec(simulated))
        runner = CaseRunner(w, stack)
        for name in simulated:
            found[name] = _said(w, await getattr(runner, name)())
        metrics = await w.metrics()
        real = []
        for harness in HARNESSES:
            real.append(_said(w, await asyncio.to_thread(real_harness_case, harness, workdir, w.step)))
    finally:
        await kubelet.stop()
    extra: list[Case] = []
    if hook is not None:
        found["valid"] = _said(
            w, await node_case(stack, hook.node, hook.worker_ref, workdir, w.step, case_id="valid-checkpoint")
        )
        with git_daemon(workdir / "node-cases-git", hook.address) as git_url:
            bed = NodeBed(
                stack, hook.node, hook.worker_ref, git_url, hook.address, hook.realnode.POD_TEMPLATE, w.step
            )
            await bed.remove(NODE_SWARM)  # the node to each case alone from here on
            found["corrupt"] = _said(w, await corrupt_case(bed))
            if other is not None:
                found["version"] = _said(w, await version_case(bed, *other))
            found["duplicate"] = _said(w, await duplicate_case(bed))
            extra.append(_said(w, await codex_case(bed)))
    else:
        node = Case(NODE_CASE_ID, "The worker image on a real node", {"continuity": "native"})
        node.skipped = f"no real node: {skip}"
        extra.append(_said(w, node))
    cases = [found[name] for name in ACCEPTANCE]
    record = build_record(
        [c.as_json() for c in [*cases, *real, *extra]],
        metrics=metrics,
        started=started,
        bin_dir=bin_dir,
        stack=stack,
        harnesses=harness_section(real),
        node=hook.record() if hook is not None else {"skipped": skip},
    )
    write_record(out, record)
    say(f"evidence record: {out} (run {record['run']['id']}, status {record['status']})")
    return 0 if record["status"] == "passed" else 1


def _said(w: World, case: Case) -> Case:
    """Print the case's outcome as a step of the story, and hand it on."""
    shown = {k: case.observed.get(k) for k in case.expected}
    w.step(
        f"case {case.id} ({case.ran_on}): expected {case.expected}, observed {shown} -> "
        + (f"skipped ({case.skipped})" if case.skipped else "pass" if case.passed else "FAIL")
    )
    return case


def _now() -> str:
    from datetime import UTC, datetime

    return datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
