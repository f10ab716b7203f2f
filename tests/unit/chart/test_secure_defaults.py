"""The chart is secure by default: Redis requires a password and only the operator reaches it; the
control API is reachable only from worker Pods of the watched namespaces, the operator's replicas and
the peers the user lists.

NetworkPolicy enforcement needs a network plugin, which the test control plane does not run (it has no
Pod network at all), so these tests evaluate the rendered policies' selectors the way the
NetworkPolicy API defines them (a Pod is selected when every matchLabels pair and matchExpression
holds; a peer with both namespaceSelector and podSelector needs both) for the Pods an attacker could
start. tests/integration/chart/test_helm_install_real.py installs the same defaults into the real
API server, which accepts every object.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
from testsupport.helm import NAMESPACE, Helm, by_kind, one

OPERATOR = {
    "app.kubernetes.io/name": "agentihooks-recovery",
    "app.kubernetes.io/instance": "rel",
    "app.kubernetes.io/component": "operator",
}
WORKER = {"swarm.agentihooks.io/execution-id": "exe-" + "a" * 32, "swarm.agentihooks.io/swarm": "s"}


def _selects(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    if selector is None:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        ok = {
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
            "In": labels.get(key) in values,
            "NotIn": labels.get(key) not in values,
        }[op]
        if not ok:
            return False
    return True


def reaches(
    policies: list[dict[str, Any]],
    target: dict[str, str],
    source: dict[str, str],
    source_ns: str,
    ns_labels: dict[str, str] | None = None,
) -> bool:
    """Whether a Pod labelled ``source`` in ``source_ns`` may open a connection to a Pod ``target`` of the
    release namespace, under the NetworkPolicy semantics (no selecting policy: allowed)."""
    namespace_labels = {"kubernetes.io/metadata.name": source_ns, **(ns_labels or {})}
    selecting = [p for p in policies if _selects(p["spec"]["podSelector"], target)]
    selecting = [p for p in selecting if "Ingress" in p["spec"].get("policyTypes", ["Ingress"])]
    if not selecting:
        return True
    for policy in selecting:
        for rule in policy["spec"].get("ingress") or []:
            for peer in rule.get("from") or []:
                ns_sel = peer.get("namespaceSelector")
                pod_sel = peer.get("podSelector")
                if ns_sel is None and source_ns != NAMESPACE:
                    continue
                if ns_sel is not None and not _selects(ns_sel, namespace_labels):
                    continue
                if pod_sel is not None and not _selects(pod_sel, source):
                    continue
                if "ipBlock" in peer:
                    continue
                return True
    return False


def _policies(helm: Helm, values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return by_kind(helm.render(values), "NetworkPolicy")


REDIS = {
    "app.kubernetes.io/name": "agentihooks-recovery",
    "app.kubernetes.io/instance": "rel",
    "app.kubernetes.io/component": "redis",
}


def test_default_install_renders_redis_auth_and_both_policies(helm: Helm) -> None:
    docs = helm.render()
    names = {p["metadata"]["name"] for p in by_kind(docs, "NetworkPolicy")}
    assert names == {"rel-agentihooks-recovery", "rel-agentihooks-recovery-redis"}
    secret = one(docs, "Secret")
    assert secret["metadata"]["name"] == "rel-agentihooks-recovery-redis-auth"
    assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    password = base64.b64decode(secret["data"]["redis-password"]).decode()
    assert len(password) >= 32 and password.isalnum()
    redis = one(docs, "StatefulSet")["spec"]["template"]["spec"]["containers"][0]
    assert (
        "--protected-mode yes" in redis["args"][0] and '--requirepass "$REDIS_PASSWORD"' in redis["args"][0]
    )
    assert "--protected-mode no" not in redis["args"][0]
    env = {e["name"]: e for e in redis["env"]}
    assert env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == secret["metadata"]["name"]
    assert password not in str([d for d in docs if d is not secret]), "the password is in the Secret only"


def test_two_renders_generate_different_passwords_so_none_is_baked_into_the_chart(helm: Helm) -> None:
    first = one(helm.render(), "Secret")["data"]["redis-password"]
    second = one(helm.render(), "Secret")["data"]["redis-password"]
    assert first != second


def test_an_existing_secret_replaces_the_generated_one(helm: Helm) -> None:
    docs = helm.render({"redis": {"auth": {"existingSecret": "mine", "key": "pw"}}})
    assert not by_kind(docs, "Secret")
    redis = one(docs, "StatefulSet")["spec"]["template"]["spec"]["containers"][0]
    assert {e["name"]: e for e in redis["env"]}["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "mine",
        "key": "pw",
    }


def test_an_external_redis_needs_a_password_secret(helm: Helm) -> None:
    res = helm.template({"redis": {"mode": "external", "external": {"url": "redis://r:6379/0"}}})
    assert res.returncode != 0
    assert "redis.auth.existingSecret is required with an external Redis" in res.stderr


def test_auth_off_is_explicit_and_turns_protected_mode_off(helm: Helm) -> None:
    docs = helm.render({"redis": {"auth": {"enabled": False}}})
    assert not by_kind(docs, "Secret")
    redis = one(docs, "StatefulSet")["spec"]["template"]["spec"]["containers"][0]
    assert "--protected-mode no" in redis["args"][0] and "requirepass" not in redis["args"][0]
    assert "env" not in redis


def test_redis_is_reachable_only_from_the_operator(helm: Helm) -> None:
    policies = _policies(helm)
    assert reaches(policies, REDIS, OPERATOR, NAMESPACE)
    assert not reaches(policies, REDIS, {}, NAMESPACE), "a Pod without labels"
    assert not reaches(policies, REDIS, WORKER, NAMESPACE), "workers never talk to Redis"
    assert not reaches(policies, REDIS, OPERATOR, "elsewhere"), "operator look-alike in another namespace"
    redis_policy = next(p for p in policies if p["metadata"]["name"].endswith("-redis"))
    assert (
        redis_policy["spec"]["policyTypes"] == ["Ingress", "Egress"] and redis_policy["spec"]["egress"] == []
    )


def test_the_control_api_is_reachable_only_from_workers_of_watched_namespaces(helm: Helm) -> None:
    policies = _policies(helm)  # the Swarms run in "agents", apart from the release namespace
    assert reaches(policies, OPERATOR, WORKER, "agents")
    assert not reaches(policies, OPERATOR, WORKER, NAMESPACE), "the release namespace is not watched"
    assert reaches(policies, OPERATOR, OPERATOR, NAMESPACE), "its own replicas"
    assert not reaches(policies, OPERATOR, {}, "agents"), "a Pod without the labels"
    assert not reaches(policies, OPERATOR, WORKER, "other-team"), "worker labels in an unwatched namespace"


@pytest.mark.parametrize("labelled", [True, False])
def test_cluster_wide_admits_workers_only_from_labelled_namespaces(helm: Helm, labelled: bool) -> None:
    policies = _policies(helm, {"rbac": {"clusterWide": True}})
    ns_labels = {"agentihooks.io/workers": "true"} if labelled else {}
    assert reaches(policies, OPERATOR, WORKER, "team-x", ns_labels) is labelled
    assert not reaches(policies, OPERATOR, {}, "team-x", ns_labels)


def test_policies_can_be_turned_off(helm: Helm) -> None:
    assert _policies(helm, {"networkPolicy": {"enabled": False}}) == []
