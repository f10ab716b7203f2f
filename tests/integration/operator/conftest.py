"""Fixtures of the operator tests: a namespace of the real control plane, a simulated kubelet, a spec.

Each test gets its own namespace (Pod Security ``restricted``) on the
session's real control plane, the chart's RBAC rendered for it, and an
operator identity that holds nothing else. The API server's audit log says
which calls that identity made: none may have been refused (a 403 means the
chart lacks a rule), and each must be listed in ``observed-api-calls.json``
(the Helm chart's RBAC is checked against that file: nothing missing, nothing
extra), so a new kind of call fails the test that made it. Run with
``AGENTIHOOKS_RECORD_API_CALLS=1`` to rewrite the file from a full run.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from testsupport.node import RealKubelet
from testsupport.realcluster import RealCluster

CALLS_FILE = Path(__file__).with_name("observed-api-calls.json")
RECORDING = os.environ.get("AGENTIHOOKS_RECORD_API_CALLS") == "1"
_SEEN: set[tuple[str, str, str]] = set()


def listed_calls() -> set[tuple[str, str, str]]:
    rows = json.loads(CALLS_FILE.read_text())["calls"]
    return {(r["verb"], r["group"], r["resource"]) for r in rows}


@pytest.fixture(scope="session", autouse=True)
def _write_recorded_calls() -> Iterator[None]:
    yield
    if RECORDING and _SEEN:
        rows = [
            {"group": g, "resource": r, "verb": v}
            for v, g, r in sorted(_SEEN, key=lambda c: (c[1], c[2], c[0]))
        ]
        doc = {
            "about": "Every (API group, resource, verb) the operator used in tests/integration/operator, "
            "recorded from the real API server's audit log; the Helm chart's RBAC must grant exactly these.",
            "calls": rows,
        }
        CALLS_FILE.write_text(json.dumps(doc, indent=2) + "\n")


@pytest.fixture
async def cluster(real_cluster: RealCluster) -> AsyncIterator[RealCluster]:
    yield real_cluster
    used = real_cluster.operator_calls()
    _SEEN.update(used)
    if not RECORDING:
        unlisted = sorted(used - listed_calls())
        assert not unlisted, f"API calls not in {CALLS_FILE.name}: {unlisted}"


@pytest.fixture
async def kubelet(real_kubelet: RealKubelet) -> RealKubelet:
    return real_kubelet


def swarm_spec(
    seats: int = 1, *, automation: bool = True, grace: int = 120, interval: float = 0.5
) -> dict[str, Any]:
    return {
        "image": "ghcr.io/agentihooks/worker:2.1.0",
        "harness": {"name": "claude", "command": ["claude", "-p", "work"]},
        "seats": [
            {
                "name": f"eng-{i}",
                "project": "github.com/acme/app",
                "task": {"id": f"t-{i}", "text": f"task {i}"},
            }
            for i in range(1, seats + 1)
        ],
        "recovery": {
            "automation": automation,
            "imagePullGraceSeconds": grace,
            "passIntervalSeconds": interval,
        },
    }
