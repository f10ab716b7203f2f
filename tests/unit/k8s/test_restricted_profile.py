"""The operator's own Pod Security ``restricted`` check, control by control, on the Pod it would create.

Each row breaks one control of the profile (baseline and restricted) in an otherwise compliant worker
Pod and names the field the refusal must name; the worker Pod the operator builds passes, with and
without a template that only narrows it. The real API server's Pod Security admission judges the same
rows in tests/integration/operator/test_restricted_profile_real.py, so the table cannot drift from
Kubernetes' own.
"""

from __future__ import annotations

import copy

import pytest
from agentihooks_operator.k8s.building.restricted import violations
from testsupport.podsecurity import CONTROLS, Edit, box, psc, worker_pod


def test_the_worker_pod_the_operator_builds_passes() -> None:
    assert violations(worker_pod()) == []


@pytest.mark.parametrize(("control", "edit", "field"), CONTROLS, ids=[c[0] for c in CONTROLS])
def test_each_control_of_the_profile_is_enforced(control: str, edit: Edit, field: str) -> None:
    pod = copy.deepcopy(worker_pod())
    edit(pod)
    found = violations(pod)
    assert found and any(field in v for v in found), (control, found)


def test_the_allowed_values_pass() -> None:
    pod = worker_pod()
    psc(pod).update(
        sysctls=[{"name": "net.ipv4.ping_group_range", "value": "0 1"}],
        appArmorProfile={"type": "RuntimeDefault"},
        seLinuxOptions={"type": "container_t", "level": "s0:c1,c2"},
    )
    box(pod).update(
        capabilities={"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
        seccompProfile={"type": "Localhost", "localhostProfile": "profiles/agent.json"},
        appArmorProfile={"type": "Localhost", "localhostProfile": "agent"},
        procMount="Default",
    )
    pod["metadata"].setdefault("annotations", {})["container.apparmor.security.beta.kubernetes.io/x"] = (
        "localhost/agent"
    )
    assert violations(pod) == []


def test_a_template_adding_a_capability_keeps_the_operators_drop_of_all() -> None:
    """A template's capabilities used to replace the operator's whole set, dropping its drop of ALL: the
    worker then ran with the runtime's default capabilities."""
    template = {"spec": {"container": {"securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE"]}}}}}
    pod = worker_pod(template)
    caps = pod["spec"]["containers"][0]["securityContext"]["capabilities"]
    assert caps == {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}
    assert violations(pod) == []
