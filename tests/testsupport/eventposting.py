"""Fakes at the edge of the Event poster's unit tests: a Kubernetes client that records Event creates
(the first one blocking until the test lets it finish) and a recovery core whose pass waits for the test.
"""

from __future__ import annotations

import threading
from typing import Any

from agentihooks_operator.k8s.building.pods import Owner
from agentihooks_operator.k8s.swarmpass import SwarmPass
from agentihooks_operator.recovery.store.keys import SwarmKeys
from agentihooks_operator.swarm import SwarmSpec

SPEC = SwarmSpec.model_validate(
    {
        "image": "ghcr.io/agentihooks/worker:2.1.0",
        "harness": {"name": "claude", "command": ["claude"]},
        "seats": [{"name": "eng-1", "project": "github.com/acme/app", "task": {"id": "t-1", "text": "x"}}],
    }
)


class FakeKube:
    """Records Event creates; the first one blocks until the test lets it finish."""

    def __init__(self) -> None:
        self.posted: list[tuple[str, str]] = []
        self.first_in_flight = threading.Event()
        self.finish_first = threading.Event()
        self.lock = threading.Lock()

    def create(self, resource: str, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        assert resource == "events"
        if not self.first_in_flight.is_set():
            self.first_in_flight.set()
            assert self.finish_first.wait(10)
        with self.lock:
            self.posted.append((body["reason"], body["involvedObject"]["kind"]))
        return body


class BlockedRecovery:
    """A recovery core whose lease check waits for the test: the pass is running until then."""

    #: No lease held yet (the placement check reads it before the lease is asked for).
    epoch = 0

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def acquire(self) -> bool:
        self.entered.set()
        assert self.release.wait(10)
        return False  # not the leader: the pass ends without writing anything


def runner_for(kube: FakeKube, recovery: BlockedRecovery) -> SwarmPass:
    return SwarmPass(
        recovery=recovery,  # type: ignore[arg-type]
        redis_client=None,  # type: ignore[arg-type]
        keys=SwarmKeys("agentihooks", "example"),
        kube=kube,  # type: ignore[arg-type]
        owner=Owner(name="example", namespace="default", uid="uid-1", controller="op-a"),
        clock=lambda: 0,
    )
