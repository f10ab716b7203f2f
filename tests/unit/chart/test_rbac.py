"""The chart grants exactly the API access the operator uses: nothing missing, nothing extra.

The reference is the list of (API group, resource, verb) the operator's own tests recorded against the
Kubernetes API (tests/integration/operator/observed-api-calls.json). Until that file exists the test
falls back to EXPECTED_API_CALLS below, the calls the operator is designed to make; switch to the
recorded file as soon as it lands (the fallback is reported in the test id).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from testsupport.helm import NAMESPACE, ROOT, Helm, by_kind, one, value_sets

OBSERVED_FILE = ROOT / "tests" / "integration" / "operator" / "observed-api-calls.json"
CLUSTER_SCOPED = {("", "namespaces"), ("", "nodes"), ("apiextensions.k8s.io", "customresourcedefinitions")}

Call = tuple[str, str, str]  # (api group, resource[/subresource], verb)

# The operator's API calls by design; used only while OBSERVED_FILE does not exist.
EXPECTED_API_CALLS: set[Call] = {
    *{("agentihooks.io", "swarms", v) for v in ("get", "list", "watch", "patch")},
    ("agentihooks.io", "swarms/status", "patch"),
    *{("", "pods", v) for v in ("get", "list", "watch", "create", "delete")},
    *{("", "configmaps", v) for v in ("get", "create", "delete")},
    *{("", "secrets", v) for v in ("get", "create", "delete")},
    ("", "events", "create"),
    *{("", "namespaces", v) for v in ("list", "watch")},
    ("", "nodes", "list"),
    *{("apiextensions.k8s.io", "customresourcedefinitions", v) for v in ("list", "watch")},
}


def _load_observed() -> set[Call]:
    raw: Any = json.loads(OBSERVED_FILE.read_text())
    rows = raw.get("calls", raw) if isinstance(raw, dict) else raw
    calls: set[Call] = set()
    for row in rows:
        group = row.get("group", row.get("apiGroup", "")) or ""
        resource = row["resource"]
        if row.get("subresource"):
            resource = f"{resource}/{row['subresource']}"
        calls.add((group, resource, row["verb"]))
    return calls


def reference_calls() -> tuple[str, set[Call]]:
    if OBSERVED_FILE.exists():
        return "recorded", _load_observed()
    return "expected-list-fallback", EXPECTED_API_CALLS


def granted(rules: list[dict[str, Any]]) -> set[Call]:
    out: set[Call] = set()
    for rule in rules:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"], f"wildcard rule: {rule}"
        assert not rule.get("resourceNames") and not rule.get("nonResourceURLs")
        out |= {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    return out


def _compare(grants: set[Call], reference: set[Call]) -> None:
    missing = sorted(reference - grants)
    extra = sorted(grants - reference)
    assert (missing, extra) == ([], []), f"missing {missing}; extra {extra}"


SOURCE, REFERENCE = reference_calls()


@pytest.mark.parametrize("source", [SOURCE])
def test_namespaced_rbac_matches_the_operators_calls(helm: Helm, source: str) -> None:
    docs = helm.render(value_sets()["replicas"])  # two watched namespaces
    roles = by_kind(docs, "Role")
    assert len(roles) == 2
    cluster = granted(one(docs, "ClusterRole")["rules"])
    for role in roles:
        namespaced = granted(role["rules"])
        assert not {(g, r) for g, r, _ in namespaced} & CLUSTER_SCOPED
        _compare(namespaced | cluster, REFERENCE)
    assert {(g, r) for g, r, _ in cluster} <= CLUSTER_SCOPED, "namespaced mode grants no cluster-wide writes"


@pytest.mark.parametrize("source", [SOURCE])
def test_cluster_wide_rbac_matches_the_operators_calls(helm: Helm, source: str) -> None:
    docs = helm.render(value_sets()["cluster-wide"])
    _compare(granted(one(docs, "ClusterRole")["rules"]), REFERENCE)


def test_every_rule_says_why() -> None:
    """Each rule of the rendered Roles carries a comment line right above it."""
    text = (ROOT / "charts" / "agentihooks-recovery" / "templates" / "_rbac.tpl").read_text()
    lines = text.splitlines()
    rule_starts = [i for i, line in enumerate(lines) if line.startswith("- apiGroups:")]
    assert len(rule_starts) >= 7
    assert all(lines[i - 1].startswith("# ") for i in rule_starts)


def test_bindings_point_at_the_operator_service_account(helm: Helm) -> None:
    docs = helm.render()
    sa = one(docs, "ServiceAccount")["metadata"]["name"]
    for binding in by_kind(docs, "RoleBinding") + by_kind(docs, "ClusterRoleBinding"):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": NAMESPACE}]
    assert one(docs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == sa


def test_comparison_reports_missing_and_extra() -> None:
    with pytest.raises(AssertionError, match=r"missing \[\('', 'pods', 'create'\)\]"):
        _compare(EXPECTED_API_CALLS - {("", "pods", "create")}, EXPECTED_API_CALLS)
    with pytest.raises(AssertionError, match="extra"):
        _compare(EXPECTED_API_CALLS | {("", "nodes", "get")}, EXPECTED_API_CALLS)
