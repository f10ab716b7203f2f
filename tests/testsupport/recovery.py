"""Helpers for recovery-core tests: an in-memory launcher, a fixed catalog, a swarm spec factory.

The launcher is a real implementation of the protocol (idempotent, thread-safe),
kept in memory because the Kubernetes one belongs to the operator's tests.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any, Literal

from agentihooks_checkpoint.catalog import CheckpointSummary
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_operator.recovery import LaunchPlan
from agentihooks_operator.swarm import SwarmSpec


class MemoryLauncher:
    """Pods as a dict; counts every call so tests can prove nothing happened twice."""

    def __init__(self) -> None:
        self.pods: dict[str, LaunchPlan] = {}
        self.created: Counter[str] = Counter()
        self.retired: Counter[str] = Counter()
        self.calls: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def launch(self, plan: LaunchPlan) -> Literal["created", "exists"]:
        with self._lock:
            self.calls.append(("launch", plan.execution_id))
            if plan.execution_id in self.pods or self.retired[plan.execution_id]:
                return "exists"
            self.pods[plan.execution_id] = plan
            self.created[plan.execution_id] += 1
            return "created"

    def exists(self, execution_id: str) -> bool:
        with self._lock:
            self.calls.append(("exists", execution_id))
            return execution_id in self.pods

    def retire(self, execution_id: str) -> None:
        with self._lock:
            self.calls.append(("retire", execution_id))
            if self.pods.pop(execution_id, None) is not None:
                self.retired[execution_id] += 1

    def add_existing(self, plan: LaunchPlan) -> None:
        self.pods[plan.execution_id] = plan


class FixedCatalog:
    """Lists the given summaries for the scope and execution they name (unit-level only)."""

    def __init__(self, summaries: list[CheckpointSummary] | None = None) -> None:
        self.summaries = list(summaries or [])
        self.calls = 0

    def list_checkpoints(
        self, scope: StoreScope, *, execution_id: str | None = None
    ) -> list[CheckpointSummary]:
        self.calls += 1
        found = [
            s
            for s in self.summaries
            if s.task_id == scope.task_id
            and s.task_generation == scope.task_generation
            and (execution_id is None or s.execution_id == execution_id)
        ]
        return sorted(found, key=lambda s: -s.checkpoint_sequence)


def summary(
    execution_id: str,
    *,
    checkpoint_id: str = "ckpt-7",
    sequence: int = 7,
    task_id: str = "task-1",
    native: bool = True,
    session: str | None = "sess-1",
    watermark: int | None = 412,
    complete: bool = True,
    key: str = "v1",
    generation: int = 1,
) -> CheckpointSummary:
    return CheckpointSummary(
        checkpoint_id=checkpoint_id,
        checkpoint_sequence=sequence,
        execution_id=execution_id,
        task_id=task_id,
        task_generation=1,
        execution_generation=generation,
        compatibility_key=key,
        harness="claude",
        native=native,
        native_session_id=session if native else None,
        watermark=watermark,
        complete=complete,
        created_at="2026-11-30T08:00:00Z",
    )


def swarm_doc(seats: int = 1, *, tag: str = "v1", automation: bool = True) -> dict[str, Any]:
    """The Swarm spec document :func:`swarm_spec` validates (callers may add fields first)."""
    return {
        "image": f"registry.example/worker:{tag}",
        "harness": {"name": "claude", "command": ["claude"]},
        "seats": [
            {
                "name": f"eng-{i + 1}",
                "project": "github.com/example/app",
                "task": {"id": f"task-{i + 1}", "text": f"do thing {i + 1}"},
            }
            for i in range(seats)
        ],
        "recovery": {"automation": automation},
    }


def swarm_spec(seats: int = 1, *, tag: str = "v1", automation: bool = True) -> SwarmSpec:
    return SwarmSpec.model_validate(swarm_doc(seats, tag=tag, automation=automation))


def observe(
    plans_or_ids: list[tuple[str, str, int]],
    *,
    failed: dict[str, str] | None = None,
    legacy: set[str] | None = None,
) -> list:  # type: ignore[type-arg]
    """Observations for (execution_id, seat, generation) triples; ``failed`` maps id → reason."""
    from agentihooks_operator.recovery import AttemptObservation

    failed = failed or {}
    legacy = legacy or set()
    return [
        AttemptObservation(
            execution_id=eid,
            seat=seat,
            generation=gen,
            state="failed" if eid in failed else "running",
            reason=failed.get(eid),  # type: ignore[arg-type]
            superseded_legacy=eid in legacy,
        )
        for eid, seat, gen in plans_or_ids
    ]


def dump_keys(client, pattern: str = "*") -> dict[bytes, object]:  # type: ignore[no-untyped-def]
    """Every key's type and content, to show that nothing changed (encoding-independent)."""
    out: dict[bytes, object] = {}
    for k in sorted(client.keys(pattern)):
        kind = client.type(k)
        if kind == b"string":
            out[k] = client.get(k)
        elif kind == b"hash":
            out[k] = client.hgetall(k)
        elif kind == b"stream":
            out[k] = client.xrange(k)
        else:
            out[k] = (kind, client.dump(k))
    return out


def keys_of(client, swarm: str, prefix: str = "agentihooks"):  # type: ignore[no-untyped-def]
    """The keys of the one namespace's ``swarm`` that Redis holds (the operator names keys by
    namespace and name); two namespaces holding it is an error here. Before any key is written,
    the keys of a namespace no test uses: every read of them is empty."""
    from agentihooks_operator.recovery.store.keys import SwarmKeys

    found = {
        k.decode().split("{", 1)[1].split("/", 1)[0]
        for k in client.scan_iter(match=f"{prefix}:swarm:{{*/{swarm}}}:*", count=1000)
    }
    assert len(found) <= 1, f"swarm {swarm} is held by several namespaces: {sorted(found)}"
    return SwarmKeys(prefix, swarm, found.pop() if found else "not-written-yet")


class _NoLaunch:
    """The launcher of a recovery core that only records requests (the CLI's path): never called."""

    def launch(self, plan: Any) -> Any:
        raise AssertionError("recording a request never launches")

    def exists(self, execution_id: str) -> bool:
        raise AssertionError("recording a request never observes Pods")

    def retire(self, execution_id: str) -> None:
        raise AssertionError("recording a request never retires")


def record_choice(redis_url: str, swarm: str, execution_id: str, choice: str, holder: str = "cli") -> bool:
    """What ``agentihooks swarm NAME restore-decision SEAT resume|fresh`` does: record the request for
    the lease holder's next pass (False when the same one is already recorded)."""
    import redis
    from agentihooks_checkpoint.catalog import EmptyCatalog
    from agentihooks_operator.recovery import Recovery

    client = redis.Redis.from_url(redis_url)
    try:
        namespace = keys_of(client, swarm).namespace  # the one namespace whose Swarm this is
        cli = Recovery(
            client, swarm, holder=holder, catalog=EmptyCatalog(), launcher=_NoLaunch(), namespace=namespace
        )
        return cli.record_request(execution_id, choice, "operator")  # type: ignore[arg-type]
    finally:
        client.close()
