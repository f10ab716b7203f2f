"""The operator's restricted-profile table against the real API server's Pod Security admission.

In a namespace that enforces ``restricted:latest``, every row of the unit table
(tests/unit/k8s/test_restricted_profile.py) is refused by the API server too (a dry-run create), and
the worker Pod the operator builds, and the allowed values, are admitted: the operator's own check,
which it applies whatever the namespace's labels, is neither looser nor stricter than Kubernetes'.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

import pytest
from testsupport.kube import eventually
from testsupport.podsecurity import CONTROLS, Edit, worker_pod
from testsupport.realcluster import RealCluster as Cluster

pytestmark = pytest.mark.slow


@pytest.fixture
async def restricted(cluster: Cluster) -> Any:
    name = f"psa-{uuid.uuid4().hex[:8]}"
    labels = {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest",
    }
    r = await cluster.http.post("/api/v1/namespaces", json={"metadata": {"name": name, "labels": labels}})
    r.raise_for_status()
    await eventually(
        lambda: cluster.get(f"/api/v1/namespaces/{name}/serviceaccounts/default"),
        timeout=60,
        what="the namespace's default ServiceAccount",
    )
    yield name
    await cluster.http.delete(f"/api/v1/namespaces/{name}")


async def _dry_run(cluster: Cluster, namespace: str, pod: dict[str, Any]) -> tuple[int, str]:
    pod = copy.deepcopy(pod)
    pod["metadata"]["namespace"] = namespace
    r = await cluster.http.post(f"/api/v1/namespaces/{namespace}/pods", params={"dryRun": "All"}, json=pod)
    return r.status_code, r.text


async def test_the_worker_pod_and_the_allowed_values_are_admitted(cluster: Cluster, restricted: str) -> None:
    status, text = await _dry_run(cluster, restricted, worker_pod())
    assert status == 201, text
    template = {"spec": {"container": {"securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE"]}}}}}
    status, text = await _dry_run(cluster, restricted, worker_pod(template))
    assert status == 201, text


@pytest.mark.parametrize(("control", "edit", "field"), CONTROLS, ids=[c[0] for c in CONTROLS])
async def test_every_row_the_operator_refuses_admission_refuses_too(
    cluster: Cluster, restricted: str, control: str, edit: Edit, field: str
) -> None:
    pod = copy.deepcopy(worker_pod())
    edit(pod)
    status, text = await _dry_run(cluster, restricted, pod)
    # 403: Pod Security names the control; 422: the Pod is not even valid (a Linux hostProcess Pod)
    assert status in (403, 422), (control, status, text)
    if status == 403:
        assert "violates PodSecurity" in text, text
