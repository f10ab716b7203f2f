"""What the acceptance cases on the real node share: a Swarm of one seat per case, and its parts.

Where this machine can host a real node, ``make evidence`` runs the acceptance cases there
(:mod:`.nodeacceptance`, :mod:`.noderesume`) instead of under the simulated kubelet. Each case is a
Swarm of one seat whose Pods are the project's worker image on a real kubelet, containerd and runc,
with the real CLI the image installs; its model is the loopback API with scripted replies (the one
simulated part, named in the record). :class:`NodeBed` makes a case's Swarm and its lent model
account, changes it as a cluster operator would (its image, cordoning the node), and removes it so
the next case has the node to itself; the helpers read a checkpoint's objects in the store and kill
a container the way the kernel does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .cases import Case
from .model_api import HOLD, Flood, ModelApi, Reply, ScriptEntry, ToolCall
from .nodeseat import EXE, SeatOnNode, until
from .realresume import DUMMY_ANTHROPIC_KEY, DUMMY_OPENAI_KEY
from .stack import Stack, StackError

SEAT = "s1"
FIRST_TURN = "list what this seat was asked to do"
LENT = {"swarm.agentihooks.io/pod-template": "allowed"}
READ = ToolCall("Read", {"file_path": "/etc/hostname"})


@dataclass
class NodeBed:
    """What every real-node case runs on: the stack, its real node, the worker image, the project."""

    stack: Stack
    node: Any
    worker_ref: str
    git_url: str
    host: str
    template: dict[str, Any]
    step: Callable[[str], None]

    def seat(self, swarm: str) -> SeatOnNode:
        return SeatOnNode(self.stack, self.node, swarm, SEAT)

    def spec(self, swarm: str, harness: str, *, memory: str = "700Mi") -> dict[str, Any]:
        command = ["claude", "-p", FIRST_TURN] if harness == "claude" else ["codex", "exec", FIRST_TURN]
        return {
            "image": self.worker_ref,
            "harness": {"name": harness, "command": command, "credentials": {"secretName": f"{swarm}-model"}},
            "seats": [
                {
                    "name": SEAT,
                    "project": "local:app",
                    "repository": self.git_url,
                    "task": {"id": f"t-{swarm}", "text": "Port the parser, on a real node"},
                }
            ],
            "recovery": {"automation": True, "passIntervalSeconds": 0.5, "imagePullGraceSeconds": 2},
            "checkpointStore": {"remote": True},
            "podTemplate": {
                "spec": {
                    **self.template,
                    "terminationGracePeriodSeconds": 3,
                    "container": {
                        "imagePullPolicy": "Never",
                        "env": [{"name": "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "value": "1"}],
                        "resources": {
                            "requests": {"cpu": "10m", "memory": memory},
                            "limits": {"memory": memory},
                        },
                    },
                }
            },
        }

    def create(self, swarm: str, spec: dict[str, Any], api: ModelApi) -> None:
        """The seat's model account (lent to the namespace's Swarms) and the Swarm."""
        harness = spec["harness"]["name"]
        data = (
            {"ANTHROPIC_API_KEY": DUMMY_ANTHROPIC_KEY, "ANTHROPIC_BASE_URL": api.base_url}
            if harness == "claude"
            else {"OPENAI_API_KEY": DUMMY_OPENAI_KEY, "config.toml": api.codex_config()}
        )
        ns = self.stack.kube.namespace
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": f"{swarm}-model", "labels": LENT},
        }
        body = {"apiVersion": "agentihooks.io/v1alpha1", "kind": "Swarm", "metadata": {"name": swarm}}
        with self.stack.kube.plane.client() as c:  # type: ignore[union-attr]
            c.post(f"/api/v1/namespaces/{ns}/secrets", json={**secret, "stringData": data}).raise_for_status()
            c.post(
                f"/apis/agentihooks.io/v1alpha1/namespaces/{ns}/swarms", json={**body, "spec": spec}
            ).raise_for_status()

    def hide_image(self, hidden: bool) -> None:
        """Take the worker image's name off the node's containerd (its content kept under another
        name, so running containers are untouched), or put it back: a node whose image was garbage
        collected, then pulled again."""
        kept = f"{self.worker_ref}-kept"
        steps = (("tag", "--force", self.worker_ref, kept), ("rm", self.worker_ref))
        for args in steps if hidden else (("tag", "--force", kept, self.worker_ref),):
            done = self.node.ctr("images", *args)
            if done.returncode != 0:
                raise StackError(f"ctr images {' '.join(args)} failed: {done.stderr.strip()}")

    def swap_image(self, archive: Path | None) -> None:
        """Load ``archive`` under the worker image's name (the name's own image kept under another, so
        running containers are untouched): a tag pushed again with other content. ``None`` puts the
        worker image back under its name."""
        kept = f"{self.worker_ref}-kept"
        if archive is None:
            steps: list[tuple[str, ...]] = [("tag", "--force", kept, self.worker_ref)]
        else:
            steps = [("tag", "--force", self.worker_ref, kept), ("import", str(archive))]
        for args in steps:
            done = self.node.ctr("images", *args, timeout=600)
            if done.returncode != 0:
                raise StackError(f"ctr images {args[0]} failed: {done.stderr.strip()}")

    def cordon(self, on: bool) -> None:
        """Mark the node (un)schedulable, as ``kubectl cordon``/``uncordon`` does."""
        with self.stack.kube.plane.client() as c:  # type: ignore[union-attr]
            c.patch(
                f"/api/v1/nodes/{self.node.name}",
                json={"spec": {"unschedulable": on or None}},
                headers={"Content-Type": "application/merge-patch+json"},
            ).raise_for_status()

    @contextlib.asynccontextmanager
    async def seat_case(
        self,
        case: Case,
        swarm: str,
        harness: str,
        script: Sequence[ScriptEntry],
        *,
        memory: str = "700Mi",
        spec_input: bool = True,
    ) -> AsyncIterator[ModelApi]:
        """A case's Swarm of one seat on the node, its model API serving ``script``, and the spec
        recorded as the case's input; the Swarm is removed when the case ends, whatever happened."""
        case.ran_on = "real node"
        with ModelApi(script, host=self.host) as api:
            spec = self.spec(swarm, harness, memory=memory)
            await asyncio.to_thread(self.create, swarm, spec, api)
            if spec_input:
                body = json.dumps(spec, sort_keys=True).encode()
                case.add_input("Swarm spec (JSON)", body, image=self.worker_ref)
            try:
                yield api
            finally:
                await self.remove(swarm)

    async def remove(self, swarm: str) -> None:
        """Delete the case's Swarm and wait until its Pods are gone (the node is free for the next)."""
        ns = self.stack.kube.namespace
        with self.stack.kube.plane.client() as c:  # type: ignore[union-attr]
            c.delete(f"/apis/agentihooks.io/v1alpha1/namespaces/{ns}/swarms/{swarm}")
        run = self.seat(swarm)
        await until(lambda: not run.pods(), f"the Pods of Swarm {swarm} gone")


def store_object(
    stack: Stack, swarm: str, checkpoint_id: str, task: str | None = None
) -> tuple[bytes, Path, str]:
    """The checkpoint's manifest bytes, and the store file of its transcript's newest piece (the
    whole transcript object, or of a segmented record its last segment) with that piece's digest."""
    base = stack.checkpoints / "namespaces" / stack.kube.namespace / "swarms" / swarm / "tasks"
    scope = base / (task or f"t-{swarm}") / "gen-1"
    pointer = json.loads((scope / "checkpoints" / checkpoint_id / "committed.json").read_text())
    data = (scope / pointer["manifest"]).read_bytes()
    doc = json.loads(data)
    pieces = (doc.get("segments") or {}).get("transcript") or [
        {"digest": doc["artifact_hashes"]["transcript"]}
    ]
    digest = str(pieces[-1]["digest"]).split(":", 1)[1]
    return data, scope / "objects" / "sha256" / digest, digest


def newest_of(run: SeatOnNode, execution_id: str) -> dict[str, Any] | None:
    rows = [c for c in run.checkpoints() if c.get("execution_id") == execution_id and c.get("complete")]
    return max(rows, key=lambda r: r["checkpoint_sequence"]) if rows else None


async def kill_by_memory(
    bed: NodeBed, run: SeatOnNode, first: dict[str, Any], release: threading.Event, case: Case
) -> None:
    """Let the endless reply grow the CLI until the kernel's memory cgroup kills the container, and
    record how the kubelet reported its end (``first_container``)."""
    name = first["metadata"]["name"]
    found: dict[str, Any] = {}
    threading.Thread(target=run.watch_end, args=(name, found), daemon=True).start()
    release.set()
    try:
        ended = await until(lambda: dict(found) or None, "the first container's end")
    except StackError as e:
        raise StackError(f"{e}\n{await asyncio.to_thread(run.diagnosis, name)}") from e
    case.observed["first_container"] = ended.get("reason")
    bed.step(f"the kernel ended {name}: {ended.get('reason')} (exit {ended.get('exitCode')})")


async def captured(bed: NodeBed, run: SeatOnNode, api: ModelApi) -> tuple[dict[str, Any], dict[str, Any]]:
    """Attempt 1's Pod and its newest native checkpoint, once the CLI waits on its next turn."""
    first = await until(lambda: run.pod_of(1), "the first attempt's Pod")
    bed.step(f"{first['metadata']['name']} runs on {bed.node.name}")
    row = await until(
        lambda: run.native_checkpoint(any(q.held for q in api.snapshot())), "a native checkpoint of attempt 1"
    )
    return first, row


def claude_script(release: threading.Event) -> list[ScriptEntry]:
    """One turn with a tool call, then the endless reply (held until ``release``), then held turns."""
    return [Reply("ack 1", READ), Flood(release), HOLD, HOLD]


def first_request(api: ModelApi, attempt: str) -> Any:
    """The first conversation request ``attempt`` sent (a resumed CLI's carries the earlier turns)."""
    return next((q for q in api.snapshot() if q.attempt == attempt and q.role == "conversation"), None)


def turns_carried(request: Any) -> bool:
    """The request holds the first turn's prompt and the model's reply to it."""
    return FIRST_TURN in request.text and "ack 1" in request.text


async def settle(seconds: float = 2.0) -> None:
    """A few more operator passes (0.5 s each): a second replacement would show up now."""
    await asyncio.sleep(seconds)


def execution_of(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["labels"][EXE])


def manifest_input(bed: NodeBed, case: Case, swarm: str, row: dict[str, Any]) -> None:
    """The checkpoint attempt 1 captured, as its manifest's bytes in the store (hashed in the record)."""
    data, _, _ = store_object(bed.stack, swarm, str(row["checkpoint_id"]))
    case.add_input("checkpoint record (manifest)", data, **ids_of(row))


def ids_of(row: dict[str, Any]) -> dict[str, Any]:
    return {k: row[k] for k in ("checkpoint_id", "execution_id") if k in row}
