"""The operator's own check of what a Swarm's Pod template may borrow (k8s/podpolicy.py), as a pure function.

The same rule at admission (the CRD's CEL rules on the real API server) and the operator refusing a
launch it built from a stored template are in tests/integration/operator/test_escalation_probe.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from agentihooks_operator.k8s.building.podpolicy import TemplatePolicy, refusals, secret_refs
from agentihooks_operator.k8s.config import OperatorConfig

NS = "team-a"
POLICY = TemplatePolicy.from_settings("agent-runner", "agentihooks", "shared-ca", NS)
OPTED_IN = {"swarm.agentihooks.io/pod-template": "allowed"}
SECRETS: dict[str, dict[str, str]] = {"opted-in": OPTED_IN, "plain": {}, "shared-ca": {}}


def _check(spec: dict[str, Any], metadata: dict[str, Any] | None = None) -> list[str]:
    template = {"spec": spec, **({"metadata": metadata} if metadata else {})}
    return refusals(template, POLICY, NS, SECRETS.get)


def test_an_ordinary_template_passes() -> None:
    spec = {
        "serviceAccountName": "agent-runner",
        "volumes": [
            {"name": "cache", "emptyDir": {}},
            {"name": "ca", "secret": {"secretName": "shared-ca"}},
            {
                "name": "cfg",
                "projected": {"sources": [{"secret": {"name": "opted-in"}}, {"configMap": {"name": "x"}}]},
            },
        ],
        "securityContext": {"runAsUser": 1000, "runAsNonRoot": True},
        "container": {
            "envFrom": [{"secretRef": {"name": "opted-in"}}],
            "env": [{"name": "K", "valueFrom": {"secretKeyRef": {"name": "opted-in", "key": "k"}}}],
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "capabilities": {"add": ["NET_BIND_SERVICE"]},
            },
        },
    }
    assert _check(spec, {"labels": {"app.kubernetes.io/component": "agent"}}) == []
    assert refusals(None, POLICY, NS, SECRETS.get) == []


@pytest.mark.parametrize(
    ("spec", "metadata", "field"),
    [
        ({"serviceAccountName": "agentihooks"}, None, "the operator's own ServiceAccount is never lent"),
        ({"serviceAccountName": "cluster-admin-ish"}, None, "'cluster-admin-ish' is not among the accounts"),
        ({"automountServiceAccountToken": True}, None, "podTemplate.spec.automountServiceAccountToken"),
        ({"volumes": [{"name": "h", "hostPath": {"path": "/"}}]}, None, "a hostPath volume is not allowed"),
        (
            {"volumes": [{"name": "n", "nfs": {"server": "x", "path": "/"}}]},
            None,
            "a nfs volume is not allowed",
        ),
        (
            {"volumes": [{"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}]},
            None,
            "a serviceAccountToken source is not allowed",
        ),
        ({"volumes": [{"name": "s", "secret": {"secretName": "plain"}}]}, None, "Secret 'plain' may be used"),
        (
            {"volumes": [{"name": "s", "secret": {"secretName": "absent"}}]},
            None,
            "Secret 'absent' may be used",
        ),
        (
            {"volumes": [{"name": "p", "projected": {"sources": [{"secret": {"name": "redis-auth"}}]}}]},
            None,
            "projected.sources[0].secret: Secret 'redis-auth'",
        ),
        ({"container": {"envFrom": [{"secretRef": {"name": "plain"}}]}}, None, "envFrom[0].secretRef"),
        (
            {
                "container": {
                    "env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": "plain", "key": "p"}}}]
                }
            },
            None,
            "env[P].valueFrom.secretKeyRef",
        ),
        ({}, {"labels": {"app.kubernetes.io/component": "operator"}}, "mark the operator's and Redis's"),
        ({}, {"labels": {"app.kubernetes.io/component": "redis"}}, "mark the operator's and Redis's"),
        ({"container": {"securityContext": {"privileged": True}}}, None, "never privileged"),
        ({"container": {"securityContext": {"allowPrivilegeEscalation": True}}}, None, "may not escalate"),
        (
            {"container": {"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}},
            None,
            "capabilities.add",
        ),
        ({"securityContext": {"runAsUser": 0}}, None, "spec.securityContext.runAsUser"),
        ({"container": {"securityContext": {"runAsNonRoot": False}}}, None, "runAsNonRoot: may not be false"),
        ({"securityContext": {"seccompProfile": {"type": "Unconfined"}}}, None, "never unconfined"),
    ],
)
def test_each_trick_is_refused_naming_the_field_and_the_rule(
    spec: dict[str, Any], metadata: dict[str, Any] | None, field: str
) -> None:
    found = _check(spec, metadata)
    assert len(found) == 1 and field in found[0], found
    assert found[0].startswith("podTemplate."), found


def test_the_operators_account_is_never_lent_even_when_allowed_by_mistake() -> None:
    policy = TemplatePolicy.from_settings("agentihooks,agent-runner", "ops/agentihooks", "", NS)
    spec = {"serviceAccountName": "agentihooks"}
    assert refusals({"spec": spec}, policy, NS, SECRETS.get) == []  # another namespace's account of that name
    assert "never lent" in refusals({"spec": spec}, policy, "ops", SECRETS.get)[0]


def test_every_refusal_of_one_template_is_named_and_no_secret_value_is_read() -> None:
    read: list[str] = []

    def labels(name: str) -> dict[str, str] | None:
        read.append(name)
        return {}

    template = {
        "spec": {
            "automountServiceAccountToken": True,
            "serviceAccountName": "agentihooks",
            "volumes": [{"name": "s", "secret": {"secretName": "one"}}],
            "container": {"envFrom": [{"secretRef": {"name": "two"}}]},
        }
    }
    found = refusals(template, POLICY, NS, labels)
    assert len(found) == 4
    assert read == ["one", "two"]
    assert [name for _, name in secret_refs(template)] == ["one", "two"]


def test_settings_parse_names_and_namespaces() -> None:
    p = TemplatePolicy.from_settings(" a , b ,", "", " s1,s2 ", "ops")
    assert p.service_accounts == frozenset({"a", "b"}) and p.operator_account is None
    assert p.secrets == frozenset({"s1", "s2"})
    assert TemplatePolicy.from_settings("", "op", "", "ops").operator_account == ("ops", "op")


def test_no_swarm_runs_in_the_operators_own_namespace_unless_allowed() -> None:
    policy = TemplatePolicy.from_settings("", "op-sa", "", "agentihooks")
    said = policy.namespace_refusal("agentihooks")
    assert said is not None and said.startswith("metadata.namespace: ")
    assert "ServiceAccount and the Redis password" in said and "rbac.allowReleaseNamespace" in said
    assert policy.namespace_refusal("agents") is None
    assert (
        TemplatePolicy.from_settings("", "op-sa", "", "agentihooks", True).namespace_refusal("agentihooks")
        is None
    )
    assert TemplatePolicy.from_settings("", "", "", "").namespace_refusal("default") is None  # not in a Pod
    assert OperatorConfig(operator_namespace="ops").template_policy.namespace_refusal("ops") is not None
    allowed = OperatorConfig(operator_namespace="ops", allow_operator_namespace=True)
    assert allowed.template_policy.namespace_refusal("ops") is None


def test_no_swarm_runs_in_an_excluded_namespace_whatever_rbac_grants() -> None:
    """A cluster-wide ClusterRole reaches kube-system too (RBAC cannot leave a namespace out): the
    operator refuses the cluster's own namespaces by default, and any the cluster operator lists."""
    default = OperatorConfig(operator_namespace="ops", allow_operator_namespace=True).template_policy
    for namespace in ("kube-system", "kube-public", "kube-node-lease"):
        said = default.namespace_refusal(namespace)
        assert said is not None and said.startswith("metadata.namespace: ")
        assert "rbac.excludeNamespaces" in said and repr(namespace) in said
    assert default.namespace_refusal("team-a") is None
    listed = OperatorConfig(
        operator_namespace="ops", excluded_namespaces=" shared , kube-system"
    ).template_policy
    assert listed.namespace_refusal("shared") is not None and listed.namespace_refusal("kube-public") is None
    assert OperatorConfig(excluded_namespaces="").template_policy.namespace_refusal("kube-system") is None
