"""The chart grants exactly the API access the operator uses: nothing missing, nothing extra.

Two sources say what the operator uses, and the grant must equal their union:

- the calls its integration tests made on the real API server, read from its audit log
  (tests/integration/operator/observed-api-calls.json, written by the operator's tests), and
- the calls written in its source (``kube.get/list/create/patch/delete("<resource>"``), which also
  cover paths those tests never drive (a crashed launch's leftover credential is patched; the control
  API reads masters' credential Secrets).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from testsupport.helm import NAMESPACE, ROOT, Helm, by_kind, one, value_sets, without_hooks

OBSERVED_FILE = ROOT / "tests" / "integration" / "operator" / "observed-api-calls.json"
OPERATOR_SRC = ROOT / "operator" / "agentihooks_operator"
CLUSTER_SCOPED = {("", "nodes")}
CORE = {"pods", "secrets", "configmaps", "events", "nodes", "namespaces", "persistentvolumeclaims"}
# `kube.get("secrets", ...`, `self.kube.get(...`, `memo["kube"].get(...`; the launcher's
# `self._create("secrets", ...)` wraps kube.create.
CALL = re.compile(r"\bkube(?:\"\])?\.(get|list|create|patch|delete)\(\s*\"(\w+)\"|\b_create\(\s*\"(\w+)\"")

Call = tuple[str, str, str]  # (api group, resource[/subresource], verb)


def recorded_calls() -> set[Call]:
    if not OBSERVED_FILE.exists():
        pytest.fail(f"{OBSERVED_FILE.relative_to(ROOT)} is missing: the operator's tests record it")
    raw: Any = json.loads(OBSERVED_FILE.read_text())
    rows = raw.get("calls", raw) if isinstance(raw, dict) else raw
    calls: set[Call] = set()
    for row in rows:
        resource = row["resource"] + (f"/{row['subresource']}" if row.get("subresource") else "")
        calls.add((row.get("group") or "", resource, row["verb"]))
    return calls


def calls_in_source() -> set[Call]:
    calls: set[Call] = set()
    for path in OPERATOR_SRC.rglob("*.py"):
        for called_verb, called_on, created in CALL.findall(path.read_text()):
            resource, verb = (created, "create") if created else (called_on, called_verb)
            assert resource in CORE, f"{path.name}: a call on {resource!r}; add its API group here"
            calls.add(("", resource, verb))
    return calls


def reference() -> set[Call]:
    return recorded_calls() | calls_in_source()


def granted(rules: list[dict[str, Any]]) -> set[Call]:
    out: set[Call] = set()
    for rule in rules:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"], f"wildcard rule: {rule}"
        assert not rule.get("resourceNames") and not rule.get("nonResourceURLs")
        out |= {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    return out


def _compare(grants: set[Call], wanted: set[Call]) -> None:
    missing = sorted(wanted - grants)
    extra = sorted(grants - wanted)
    assert (missing, extra) == ([], []), f"missing {missing}; extra {extra}"


def test_the_source_scan_finds_the_known_calls() -> None:
    found = calls_in_source()
    assert {
        ("", "pods", "create"),
        ("", "secrets", "patch"),
        ("", "secrets", "get"),
        ("", "nodes", "list"),
    } <= found


def test_namespaced_rbac_matches_the_operators_calls(helm: Helm) -> None:
    # the uninstall hook's own RBAC is checked in test_uninstall_hook.py
    docs = without_hooks(helm.render(value_sets()["replicas"]))  # two watched namespaces
    roles = [r for r in by_kind(docs, "Role") if not r["metadata"]["name"].endswith("-peers")]
    assert len(roles) == 2
    peers = one([r for r in by_kind(docs, "Role") if r not in roles], "Role")
    assert granted(peers["rules"]) == {("", "pods", "get")} <= reference()  # forwarding's peer check
    cluster = granted(one(docs, "ClusterRole")["rules"])
    assert {(g, r) for g, r, _ in cluster} <= CLUSTER_SCOPED, "namespaced mode grants no cluster-wide writes"
    for role in roles:
        namespaced = granted(role["rules"])
        assert not {(g, r) for g, r, _ in namespaced} & CLUSTER_SCOPED
        _compare(namespaced | cluster, reference())


def test_cluster_wide_rbac_matches_the_operators_calls(helm: Helm) -> None:
    docs = without_hooks(helm.render(value_sets()["cluster-wide"]))
    _compare(granted(one(docs, "ClusterRole")["rules"]), reference())


def test_every_rule_says_why() -> None:
    """Each rule of the rendered Roles carries a comment line right above it."""
    text = (ROOT / "charts" / "agentihooks-recovery" / "templates" / "_rbac.tpl").read_text()
    lines = text.splitlines()
    rule_starts = [i for i, line in enumerate(lines) if line.startswith("- apiGroups:")]
    assert len(rule_starts) >= 7
    assert all(lines[i - 1].startswith("# ") for i in rule_starts)


def test_bindings_point_at_the_operator_service_account(helm: Helm) -> None:
    docs = without_hooks(helm.render())
    sa = one(docs, "ServiceAccount")["metadata"]["name"]
    for binding in by_kind(docs, "RoleBinding") + by_kind(docs, "ClusterRoleBinding"):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": NAMESPACE}]
    assert one(docs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == sa


def test_comparison_reports_missing_and_extra() -> None:
    wanted = reference()
    with pytest.raises(AssertionError, match=r"missing \[\('', 'pods', 'create'\)\]"):
        _compare(wanted - {("", "pods", "create")}, wanted)
    with pytest.raises(AssertionError, match=r"extra \[\('', 'nodes', 'get'\)\]"):
        _compare(wanted | {("", "nodes", "get")}, wanted)


def test_secrets_are_never_listed_or_watched(helm: Helm) -> None:
    """The operator reads Secrets it is told the name of; it never needs to enumerate them."""
    for values in ("default", "cluster-wide"):
        docs = helm.render(value_sets()[values]) if values != "default" else helm.render()
        for kind in ("Role", "ClusterRole"):
            for role in by_kind(docs, kind):  # the uninstall hook's roles too
                verbs = {v for rule in role["rules"] if "secrets" in rule["resources"] for v in rule["verbs"]}
                assert not verbs & {"list", "watch"}, f"{kind} grants {verbs} on secrets"
