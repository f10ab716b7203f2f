"""Fixtures of the operator tests: an emulated Kubernetes API with a kubelet, and a Swarm spec."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from testsupport.kube import Cluster, emulated_cluster
from testsupport.kubelet import Kubelet


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with emulated_cluster(tmp_path) as c:
        yield c


@pytest.fixture
async def kubelet(cluster: Cluster) -> AsyncIterator[Kubelet]:
    k = Kubelet(cluster.url)
    yield k
    await k.close()


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
