"""The five acceptance cases of SV2-CKP-05, each run on the live system and recorded as it happened.

A :class:`Case` holds its inputs (with their sha256), what the package
promises for it, and what the run observed: the replacement's own
``restore_verified`` or ``restore_refused`` line and how many replacements
the controller admitted for the seat. :class:`CaseRunner` drives one case per
seat of swarm ``evidence`` through the simulated kubelet and the control API.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .containers import secret_value
from .kubelet import PodRun
from .stack import Stack
from .world import World

SWARM = "evidence"
PROJECT = "local:demo-app"
UNSUPPORTED_CLAUDE = "2.2.0 (Claude Code)"
OTHER_CONVERSATION = "6f1d2c3b-0000-4000-8000-00000000beef"


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Case:
    id: str
    title: str
    expected: dict[str, Any]
    inputs: list[dict[str, Any]] = field(default_factory=list)
    observed: dict[str, Any] = field(default_factory=dict)
    #: Why the case could not run (then it is recorded ``skipped``, never passed).
    skipped: str | None = None
    #: Where its Pods ran: the simulated kubelet, or the real node (with the real CLIs).
    ran_on: str = "simulated kubelet"

    def add_input(self, name: str, data: bytes, **extra: Any) -> None:
        self.inputs.append({"name": name, "sha256": sha256_bytes(data), "bytes": len(data), **extra})

    @property
    def passed(self) -> bool:
        return self.skipped is None and all(self.observed.get(k) == v for k, v in self.expected.items())

    @property
    def result(self) -> str:
        return "skipped" if self.skipped is not None else "pass" if self.passed else "fail"

    def as_json(self) -> dict[str, Any]:
        out = {
            "id": self.id,
            "title": self.title,
            "inputs": self.inputs,
            "expected": self.expected,
            "observed": self.observed,
            "result": self.result,
            "ran_on": self.ran_on,
        }
        if self.skipped is not None:
            out["skip_reason"] = self.skipped
        return out


class CaseRunner:
    """Runs the five cases on one :class:`World` and fills in what each observed."""

    def __init__(self, w: World, stack: Stack) -> None:
        self.w = w
        self.stack = stack

    def scope_dir(self, seat: str) -> Path:
        ns = self.stack.kube.namespace  # this release's layout: namespaces/<ns>/swarms/<name>/...
        return self.stack.checkpoints / "namespaces" / ns / "swarms" / SWARM / "tasks" / f"t-{seat}" / "gen-1"

    def manifest(self, seat: str, checkpoint_id: str) -> tuple[bytes, dict[str, Any]]:
        base = self.scope_dir(seat)
        pointer = json.loads((base / "checkpoints" / checkpoint_id / "committed.json").read_text())
        data = (base / pointer["manifest"]).read_bytes()
        return data, json.loads(data)

    async def outcome(self, seat: str, case: Case) -> None:
        """The replacement's own report: continuity it logged, or the reason it refused."""
        second = await self.w.run_of(seat, 2)
        line = await self.w.worker_event(second, "restore_verified", "restore_refused")
        if line["event"] == "restore_verified":
            case.observed["continuity"] = line.get("recovery")
        else:
            case.observed["refusal"] = line.get("reason")
        case.observed["worker_line"] = {
            k: line.get(k) for k in ("event", "recovery", "reason", "checkpoint_id")
        }
        await self.settle()
        case.observed["replacements_admitted"] = len(self.w.kubelet.runs(seat)) - 1

    async def settle(self, passes: int = 4) -> None:
        """Let the operator run a few more passes, so a second replacement would have shown up."""
        await asyncio.sleep(passes * 0.5)

    async def captured(self, seat: str) -> tuple[PodRun, dict[str, Any]]:
        first = await self.w.run_of(seat, 1)
        row = await self.w.captured(first, native=True)
        return first, row

    async def valid(self) -> Case:
        case = Case(
            "valid-checkpoint",
            "A valid native checkpoint",
            {"continuity": "native", "replacements_admitted": 1},
        )
        first, row = await self.captured("valid")
        data, _ = self.manifest("valid", row["checkpoint_id"])
        case.add_input("checkpoint record (manifest)", data, checkpoint_id=row["checkpoint_id"])
        await self.w.kubelet.oom_kill(first)
        await self.outcome("valid", case)
        return case

    async def corrupt(self) -> Case:
        case = Case(
            "corrupt-object",
            "A checkpoint object whose bytes changed",
            {"refusal": "corrupt_object", "replacements_admitted": 1},
        )
        # The controller hashes a checkpoint before it offers it and notices a stored object that
        # changed since, so the damage is done after it admitted the replacement and before that
        # replacement's container starts: the worker's own verification is what this case shows.
        gate = self.w.kubelet.gate("corrupt", 2)
        first, _ = await self.captured("corrupt")
        await self.w.kubelet.oom_kill(first, report=False)  # no more captures from here on
        newest = max(
            (
                r
                for r in await self.w.checkpoints("corrupt")
                if r["execution_id"] == first.execution_id and r["complete"]
            ),
            key=lambda r: r["checkpoint_sequence"],
        )
        data, doc = self.manifest("corrupt", newest["checkpoint_id"])
        # the transcript's object; of a segmented record (an event capture), its newest segment
        pieces = (doc.get("segments") or {}).get("transcript") or [
            {"digest": doc["artifact_hashes"]["transcript"]}
        ]
        digest = pieces[-1]["digest"].split(":", 1)[1]
        obj = self.scope_dir("corrupt") / "objects" / "sha256" / digest
        await self.w.kubelet.report_exit(first)
        await self.w.run_of("corrupt", 2, started=False)  # admitted, held before it starts
        body = bytearray(obj.read_bytes())
        body[len(body) // 2] ^= 0x01  # same size, one bit different
        obj.write_bytes(bytes(body))
        case.add_input("checkpoint record (manifest)", data, checkpoint_id=newest["checkpoint_id"])
        case.add_input("transcript object after one bit was flipped", bytes(body), recorded_sha256=digest)
        # (a segment of it, when the newest checkpoint was an event capture: what a restore reads)
        gate.set()
        await self.outcome("corrupt", case)
        return case

    async def version(self) -> Case:
        case = Case(
            "unsupported-harness-version",
            "The replacement's harness is not qualified for native resume",
            {"refusal": "unqualified_version", "replacements_admitted": 1},
        )
        first, row = await self.captured("version")
        data, _ = self.manifest("version", row["checkpoint_id"])
        case.add_input("checkpoint record (manifest)", data, checkpoint_id=row["checkpoint_id"])
        case.add_input("replacement's `claude --version` output", UNSUPPORTED_CLAUDE.encode())
        await self.w.kubelet.oom_kill(first)
        await self.outcome("version", case)
        return case

    async def mismatch(self) -> Case:
        case = Case(
            "conversation-mismatch",
            "The attempt held another conversation than the checkpoint's",
            {
                "resume_label": "Continue from context",
                "continuity": "reconstructed",
                "replacements_admitted": 1,
            },
        )
        first, _ = await self.captured("mismatch")
        await self.w.kubelet.oom_kill(first, report=False)
        body = json.dumps({"session_id": OTHER_CONVERSATION}).encode()
        token = await self.worker_token(first)
        async with self.stack.api() as api:
            r = await api.post(
                f"/v1/executions/{first.execution_id}/session",
                content=body,
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            )
        case.observed["session_report_status"] = r.status_code
        newest = max(
            (
                r
                for r in await self.w.checkpoints("mismatch")
                if r["execution_id"] == first.execution_id and r["complete"]
            ),
            key=lambda r: r["checkpoint_sequence"],
        )
        data, _ = self.manifest("mismatch", newest["checkpoint_id"])
        case.add_input("checkpoint record (manifest)", data, checkpoint_id=newest["checkpoint_id"])
        case.add_input("the attempt's last session report (request body)", body)
        await self.w.kubelet.report_exit(first)
        # The checkpoint holds another session than the attempt's: no native resume without asking,
        # the card offers context continuation, and resume reconstructs.
        card = await self.w.card("mismatch", binding="awaiting decision")
        case.observed["resume_label"] = card.get("resume_label")
        await self.settle()
        case.observed["launched_before_the_choice"] = len(self.w.kubelet.runs("mismatch")) - 1
        self.stack.cli("swarm", SWARM, "restore-decision", "mismatch", "resume", check=True)
        await self.outcome("mismatch", case)
        return case

    async def duplicate(self) -> Case:
        case = Case(
            "duplicated-restore-request",
            "The same resume request posted three times (once, then twice at once)",
            {
                "continuity": "native",
                "replacements_admitted": 1,
                "distinct_replacements_answered": 1,
                "accepted_answers": 3,
            },
        )
        first, row = await self.captured("duplicate")
        data, _ = self.manifest("duplicate", row["checkpoint_id"])
        case.add_input("checkpoint record (manifest)", data, checkpoint_id=row["checkpoint_id"])
        await self.w.kubelet.image_pull_failure(first)
        await self.w.card("duplicate", binding="awaiting decision")
        body = json.dumps({"choice": "resume", "agent": "operator"}).encode()
        case.add_input("restore-decision request body (posted 3 times)", body)
        path = f"/v1/executions/{first.execution_id}/restore-decision"
        headers = {"Content-Type": "application/json"}
        async with self.stack.api() as api:
            # The card offers a choice only once the decision record exists, so the first post is
            # accepted as is; then the same request twice at once.
            first_answer = await api.post(path, content=body, headers=headers)
            more = await asyncio.gather(*(api.post(path, content=body, headers=headers) for _ in range(2)))
            answers = [first_answer, *more]
        replies = [(a.status_code, _json(a)) for a in answers]
        case.observed["answers"] = [
            {"status": s, "replacement": b.get("replacement"), "replayed": b.get("replayed")}
            for s, b in replies
        ]
        case.observed["accepted_answers"] = sum(1 for s, _ in replies if s == 200)
        case.observed["distinct_replacements_answered"] = len(
            {b.get("replacement") for s, b in replies if s < 300 and b.get("replacement")}
        )
        await self.outcome("duplicate", case)
        return case

    async def worker_token(self, run: PodRun) -> str:
        """The attempt's worker credential, as its container's ``secretKeyRef`` hands it over."""
        secret = await self.w.secret(f"swarm-{run.execution_id}-credential")
        return secret_value(secret, "token")


def _json(response: Any) -> dict[str, Any]:
    try:
        return dict(response.json())
    except ValueError:
        return {}
