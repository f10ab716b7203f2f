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
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from .cases import Case
from .model_api import HOLD, Flood, Hold, ModelApi, Reply, ToolCall
from .nodehost import RealNodeHook, git_daemon, node_reason, node_support
from .realresume import DUMMY_ANTHROPIC_KEY
from .stack import Stack, StackError

SWARM = "on-node"
NODE_CASE_ID = "real-node-native-resume"
SEAT = "node-1"
FIRST_TURN = "list what this seat was asked to do"
EXE = "swarm.agentihooks.io/execution-id"
#: Far above what a wait on a real container takes here; a guard against a hang, not a speed bound.
HANG = 300.0


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


class NodeRun:
    """Reads of the real cluster this case needs: Pods, their ends, the container logs, the audit log."""

    def __init__(self, stack: Stack, node: Any) -> None:
        assert stack.kube.plane is not None
        self.plane = stack.kube.plane
        self.ns = stack.kube.namespace
        self.node = node

    def http(self) -> httpx.Client:
        return self.plane.client()

    def pods(self) -> list[dict[str, Any]]:
        with self.http() as c:
            r = c.get(
                f"/api/v1/namespaces/{self.ns}/pods",
                params={"labelSelector": f"swarm.agentihooks.io/swarm={SWARM}"},
            )
            r.raise_for_status()
            return list(r.json().get("items") or [])

    def pod_of(self, generation: int) -> dict[str, Any] | None:
        label = "swarm.agentihooks.io/generation"
        return next((p for p in self.pods() if p["metadata"]["labels"].get(label) == str(generation)), None)

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

    def verified(self, pod: str) -> list[dict[str, Any]]:
        lines = [ln for ln in self.log(pod).splitlines() if "restore_verified" in ln]
        return [json.loads(ln.split(" ", 3)[-1]) for ln in lines]

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
            if ref.get("namespace") == self.ns and swarm == SWARM and made:
                out.append(str(ref.get("name") or meta.get("name")))
        return out


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


async def node_case(
    stack: Stack,
    node: Any,
    worker_ref: str,
    workdir: Path,
    step: Callable[[str], None],
    *,
    meanwhile: Callable[[Case], None] | None = None,
) -> Case:
    """The case, run on ``node`` with the stack's operator; what it observed, ready for the record.

    ``meanwhile`` runs while the replacement still runs (the demo prints the seat's status then).
    The Swarm's recovery is paused before the model API stops: the replacement's held request then
    fails and its harness exits, and that failure waits for a decision instead of a third Pod."""
    realnode = node_support()
    host = realnode.NODE_IP
    case = Case(
        NODE_CASE_ID,
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
    run = NodeRun(stack, node)
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
        checkpoint = await until(lambda: _native_checkpoint(stack, api), "a native checkpoint of attempt 1")
        case.add_input(
            "native checkpoint (id)", str(checkpoint["checkpoint_id"]).encode(), **_ids(checkpoint)
        )
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
        card = await until(lambda: _card(stack, continuity="native"), "the replacement's reported continuity")
        case.observed["continuity"] = card.get("continuity")
        fence, decision = await asyncio.to_thread(_records, stack, first["metadata"]["labels"][EXE])
        case.observed["fence_reason"] = fence.get("reason")
        case.observed["released"] = fence.get("released")
        case.observed["decided_by"] = (
            "automatic" if decision.get("decided_by") == "automation" else decision.get("decided_by")
        )
        verified = await until(lambda: run.verified(name2), "restore_verified in the replacement's log")
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


def _native_checkpoint(stack: Stack, api: ModelApi) -> dict[str, Any] | None:
    if not any(q.held for q in api.snapshot()):
        return None  # the CLI has not sent its second turn yet
    doc = _control(stack, f"/seats/{SEAT}/checkpoints")
    rows = [c for c in (doc or {}).get("checkpoints") or [] if c.get("native") and c.get("complete")]
    return dict(rows[-1]) if rows else None


def _control(stack: Stack, under: str) -> dict[str, Any] | None:
    """GET ``/v1/namespaces/NS/swarms/SWARM<under>`` on the control API; ``None`` unless it answers 200."""
    path = f"/v1/namespaces/{stack.kube.namespace}/swarms/{SWARM}{under}"
    headers = {"Authorization": f"Bearer {stack.token}"}
    try:
        r = httpx.get(stack.control_url + path, headers=headers, timeout=10)
    except httpx.HTTPError:
        return None
    return dict(r.json()) if r.status_code == 200 else None


def _ids(row: dict[str, Any]) -> dict[str, Any]:
    return {k: row[k] for k in ("checkpoint_id", "execution_id") if k in row}


def _card(stack: Stack, **want: Any) -> dict[str, Any] | None:
    for card in (_control(stack, "/status") or {}).get("handoffs") or []:
        if card.get("seat") == SEAT and all(card.get(k) == v for k, v in want.items()):
            return dict(card)
    return None


def _records(stack: Stack, execution_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The fenced attempt's fence and decision records, as the controller stored them in Redis."""
    import redis
    from agentihooks_operator.recovery.store.keys import SwarmKeys

    keys = SwarmKeys("agentihooks", SWARM, stack.kube.namespace)
    client = redis.Redis.from_url(stack.redis_url)
    try:
        fence = client.hget(keys.attempt_fences, execution_id)
        decision = client.hget(keys.attempt_recoveries, execution_id)
    finally:
        client.close()
    return json.loads(fence or "{}"), json.loads(decision or "{}")


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
