"""``kubectl explain`` on the real API server prints the CRD's descriptions (from the model's docstrings)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from agentihooks_operator.swarm import RecoverySpec
from testsupport.controlplane import ControlPlane
from testsupport.helm import find_tool

pytestmark = pytest.mark.slow


def explain(kubectl: Path, plane: ControlPlane, field: str, home: Path) -> str:
    """The output of ``kubectl explain``; retried while the API server publishes the CRD's OpenAPI."""
    deadline = time.monotonic() + 60
    while True:
        res = subprocess.run(
            [str(kubectl), "--kubeconfig", str(plane.admin_kubeconfig), "explain", field],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "HOME": str(home)},
        )
        if res.returncode == 0 or time.monotonic() > deadline:
            assert res.returncode == 0, res.stderr
            return " ".join(res.stdout.split())
        time.sleep(1)


@pytest.mark.parametrize(
    ("field", "says"),
    [
        ("swarms.spec", "A swarm of agent seats"),
        (
            "swarms.spec.recovery.passIntervalSeconds",
            " ".join((RecoverySpec.model_fields["pass_interval_seconds"].description or "").split()),
        ),
        ("swarms.spec.seats.project", "A checkpoint is restored only into the project"),
        ("swarms.spec.podTemplate.spec.affinity", "If specified, the pod's scheduling constraints"),
        ("swarms.spec.podTemplate.spec.container.image", "Set by the operator"),
        ("swarms.status.awaitingDecision", "waits for a restore decision"),
    ],
)
def test_kubectl_explain_describes_the_field(
    control_plane: ControlPlane, tmp_path: Path, field: str, says: str
) -> None:
    assert says in explain(find_tool("kubectl"), control_plane, field, tmp_path)
