"""Deployment strategy, PodDisruptionBudget, overridable securityContexts and the Redis image."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from testsupport.helm import CHART, Helm, by_kind, one

OPERATOR_POD_SC = {
    "runAsNonRoot": True,
    "runAsUser": 10001,
    "runAsGroup": 10001,
    "fsGroup": 10001,
    "seccompProfile": {"type": "RuntimeDefault"},
}
CONTAINER_SC = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
REDIS_POD_SC = {**OPERATOR_POD_SC, "runAsUser": 999, "runAsGroup": 999, "fsGroup": 999}


def _strategy(helm: Helm, values: dict[str, Any] | None = None) -> dict[str, Any]:
    strategy: dict[str, Any] = one(helm.render(values), "Deployment")["spec"]["strategy"]
    return strategy


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (None, "RollingUpdate"),
        ({"checkpointStore": {"mode": "bucket", "bucket": {"name": "b"}}}, "RollingUpdate"),
        ({"checkpointStore": {"mode": "root"}}, "Recreate"),
        (
            {"checkpointStore": {"mode": "root", "root": {"persistence": {"existingClaim": "mine"}}}},
            "Recreate",
        ),
        (
            {
                "checkpointStore": {
                    "mode": "root",
                    "root": {"persistence": {"accessModes": ["ReadWriteMany"]}},
                }
            },
            "RollingUpdate",
        ),
    ],
    ids=["default", "bucket", "rwo-claim", "existing-rwo-claim", "rwx-claim"],
)
def test_recreate_only_with_a_read_write_once_claim(
    helm: Helm, values: dict[str, Any] | None, expected: str
) -> None:
    assert _strategy(helm, values)["type"] == expected


def test_an_explicit_strategy_wins(helm: Helm) -> None:
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
    assert (
        _strategy(helm, {"operator": {"strategy": strategy}, "checkpointStore": {"mode": "root"}}) == strategy
    )


def test_a_misspelt_strategy_is_refused(helm: Helm) -> None:
    res = helm.template({"operator": {"strategy": {"typ": "Recreate"}}})
    assert res.returncode != 0 and "typ" in res.stderr


@pytest.mark.parametrize(("replicas", "rendered"), [(1, False), (2, True)])
def test_pdb_only_with_several_replicas(helm: Helm, replicas: int, rendered: bool) -> None:
    values = {"operator": {"replicas": replicas}, "podDisruptionBudget": {"enabled": True}}
    pdbs = by_kind(helm.render(values), "PodDisruptionBudget")
    assert bool(pdbs) is rendered
    if rendered:
        assert pdbs[0]["spec"]["minAvailable"] == 1


def test_pdb_that_would_block_every_eviction_is_refused(helm: Helm) -> None:
    res = helm.template(
        {"operator": {"replicas": 2}, "podDisruptionBudget": {"enabled": True, "minAvailable": 2}}
    )
    assert res.returncode != 0
    assert "podDisruptionBudget.minAvailable must be below operator.replicas" in res.stderr
    ok = helm.render(
        {"operator": {"replicas": 2}, "podDisruptionBudget": {"enabled": True, "minAvailable": "50%"}}
    )
    assert one(ok, "PodDisruptionBudget")["spec"]["minAvailable"] == "50%"


def _pods(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        "operator": one(docs, "Deployment")["spec"]["template"]["spec"],
        "redis": one(docs, "StatefulSet")["spec"]["template"]["spec"],
        "hook": one(docs, "Job")["spec"]["template"]["spec"],
    }


def test_default_security_contexts_are_unchanged(helm: Helm) -> None:
    pods = _pods(helm.render())
    assert pods["operator"]["securityContext"] == OPERATOR_POD_SC
    assert pods["operator"]["containers"][0]["securityContext"] == CONTAINER_SC
    assert pods["redis"]["securityContext"] == REDIS_POD_SC
    assert pods["redis"]["containers"][0]["securityContext"] == CONTAINER_SC
    # the uninstall hook runs the operator image as the operator does
    assert pods["hook"]["securityContext"] == OPERATOR_POD_SC
    assert pods["hook"]["containers"][0]["securityContext"] == CONTAINER_SC


def test_security_contexts_merge_and_drop_keys(helm: Helm) -> None:
    values = {
        "operator": {
            "podSecurityContext": {"runAsUser": None, "runAsGroup": None, "fsGroup": None},
            "securityContext": {"capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}},
        },
        "redis": {
            "embedded": {"podSecurityContext": {"runAsUser": 1001, "fsGroupChangePolicy": "OnRootMismatch"}}
        },
    }
    pods = _pods(helm.render(values))
    assert pods["operator"]["securityContext"] == {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    sc = pods["operator"]["containers"][0]["securityContext"]
    assert sc["capabilities"] == {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}
    assert sc["readOnlyRootFilesystem"] is True, "keys not overridden keep their defaults"
    redis = pods["redis"]["securityContext"]
    assert redis["runAsUser"] == 1001 and redis["fsGroupChangePolicy"] == "OnRootMismatch"
    assert redis["runAsGroup"] == 999


@pytest.mark.parametrize(
    "values",
    [
        {"operator": {"podSecurityContext": {"runAsUsr": 1}}},
        {"operator": {"securityContext": {"readOnlyRootFileSystem": False}}},
        {"redis": {"embedded": {"securityContext": {"privileged": "no"}}}},
    ],
    ids=["pod-typo", "container-typo", "wrong-type"],
)
def test_security_context_typos_are_refused(helm: Helm, values: dict[str, Any]) -> None:
    res = helm.template(values)
    assert res.returncode != 0 and "schema" in res.stderr.lower()


def test_redis_image_is_a_current_7x_patch() -> None:
    tag = yaml.safe_load((CHART / "values.yaml").read_text())["redis"]["embedded"]["image"]["tag"]
    match = re.fullmatch(r"7\.(\d+)\.(\d+)-alpine", tag)
    assert match, f"{tag} is not an exact Redis 7.x patch"
    assert (int(match[1]), int(match[2])) >= (4, 9), "7.4.9 (May 2026) is the newest 7.x patch known"


def test_pull_secrets_may_be_names_or_objects_and_reach_every_pod(helm: Helm) -> None:
    """Issue 47: ``imagePullSecrets`` took bare names only; a PodSpec's ``{name: ...}`` failed."""
    docs = helm.render({"operator": {"imagePullSecrets": ["regcred", {"name": "other-cred"}]}})
    pods = [d["spec"]["template"]["spec"] for d in docs if d["kind"] in ("Deployment", "StatefulSet", "Job")]
    assert len(pods) == 3
    for spec in pods:
        assert spec["imagePullSecrets"] == [{"name": "regcred"}, {"name": "other-cred"}]
    refused = helm.template({"operator": {"imagePullSecrets": [{"secretName": "x"}]}})
    assert refused.returncode != 0 and "imagePullSecrets" in refused.stderr


def test_redis_and_the_hook_take_a_priority_class(helm: Helm) -> None:
    docs = helm.render(
        {
            "operator": {"priorityClassName": "agents-high"},
            "redis": {"embedded": {"priorityClassName": "critical"}},
        }
    )
    assert one(docs, "StatefulSet")["spec"]["template"]["spec"]["priorityClassName"] == "critical"
    assert (
        one(docs, "Job")["spec"]["template"]["spec"]["priorityClassName"] == "agents-high"
    )  # the operator's
    docs = helm.render({"uninstallHook": {"priorityClassName": "hook-class"}})
    assert one(docs, "Job")["spec"]["template"]["spec"]["priorityClassName"] == "hook-class"
    assert "priorityClassName" not in one(docs, "StatefulSet")["spec"]["template"]["spec"]


def test_redis_keeps_its_data_on_an_existing_claim(helm: Helm) -> None:
    sts = one(
        helm.render({"redis": {"embedded": {"persistence": {"existingClaim": "redis-data"}}}}), "StatefulSet"
    )
    volumes = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
    assert volumes["data"] == {"name": "data", "persistentVolumeClaim": {"claimName": "redis-data"}}
    assert (
        "volumeClaimTemplates" not in sts["spec"]
        and "persistentVolumeClaimRetentionPolicy" not in sts["spec"]
    )
    default = one(helm.render(), "StatefulSet")
    assert default["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
