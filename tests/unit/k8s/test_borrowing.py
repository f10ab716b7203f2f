"""What a Swarm may borrow from its namespace (k8s/building/borrowing.py): claims, pull Secrets, the
checkpoint store's claim and provider Secrets only when their owner lent them, as pure functions.

On the real API server (the CRD's static rule, and the operator refusing a launch with the chart's
RBAC) they are in tests/integration/operator/test_borrowed_data.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from agentihooks_operator.k8s.building import borrowing
from agentihooks_operator.k8s.building.podpolicy import TemplatePolicy, refusals
from agentihooks_operator.k8s.config import OperatorConfig

NS = "team-a"
LENT = {"swarm.agentihooks.io/pod-template": "allowed"}
SECRETS: dict[str, dict[str, str]] = {"pull-lent": LENT, "pull-plain": {}}
CLAIMS: dict[str, dict[str, str]] = {"data-lent": LENT, "data-plain": {"team": "a"}, "listed": {}}
POLICY = OperatorConfig(worker_claims="listed", worker_secrets="pull-listed").template_policy


def _check(spec: dict[str, Any]) -> list[str]:
    return refusals({"spec": spec}, POLICY, NS, SECRETS.get, CLAIMS.get)


def _clone(source: dict[str, Any], **more: Any) -> dict[str, Any]:
    template = {"spec": {"accessModes": ["ReadWriteOnce"], "dataSource": source, **more}}
    return {"volumes": [{"name": "w", "ephemeral": {"volumeClaimTemplate": template}}]}


def test_lent_and_listed_objects_pass() -> None:
    spec = {
        "imagePullSecrets": [{"name": "pull-lent"}, {"name": "pull-listed"}],
        "volumes": [
            {"name": "a", "persistentVolumeClaim": {"claimName": "data-lent"}},
            {"name": "b", "persistentVolumeClaim": {"claimName": "listed"}},
            {"name": "fresh", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["RWO"]}}}},
        ],
    }
    assert _check(spec) == []
    assert _check(_clone({"kind": "PersistentVolumeClaim", "name": "data-lent"})) == []


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        (
            {"volumes": [{"name": "a", "persistentVolumeClaim": {"claimName": "data-plain"}}]},
            "podTemplate.spec.volumes[a].persistentVolumeClaim: PersistentVolumeClaim 'data-plain' may be "
            "used by a Swarm only when it carries the label swarm.agentihooks.io/pod-template=allowed (or "
            "the cluster operator lists it in AGENTIHOOKS_WORKER_CLAIMS)",
        ),
        (  # a claim that does not exist reads as one not lent: nothing is learnt of the namespace
            {"volumes": [{"name": "a", "persistentVolumeClaim": {"claimName": "nowhere"}}]},
            "PersistentVolumeClaim 'nowhere' may be used by a Swarm only when",
        ),
        (
            _clone({"kind": "PersistentVolumeClaim", "name": "data-plain"}),
            "volumes[w].ephemeral.volumeClaimTemplate.spec.dataSource: PersistentVolumeClaim 'data-plain'",
        ),
        (
            _clone(
                {"kind": "PersistentVolumeClaim", "name": "data-lent"},
                dataSourceRef={"kind": "PersistentVolumeClaim", "name": "data-plain"},
            ),
            "spec.dataSourceRef: PersistentVolumeClaim 'data-plain'",
        ),
        (
            _clone({"kind": "VolumeSnapshot", "apiGroup": "snapshot.storage.k8s.io", "name": "s"}),
            "spec.dataSource: a volume made from a VolumeSnapshot is not allowed in a Swarm",
        ),
        (  # a claim-like kind of another API group is not a claim
            _clone({"kind": "PersistentVolumeClaim", "apiGroup": "example.com", "name": "data-lent"}),
            "a volume made from a PersistentVolumeClaim is not allowed",
        ),
        (
            _clone(
                {"kind": "PersistentVolumeClaim", "name": "data-lent"},
                dataSourceRef={"kind": "PersistentVolumeClaim", "name": "data-lent", "namespace": "other"},
            ),
            "dataSourceRef.namespace: a Swarm clones claims of its own namespace only",
        ),
        (
            _clone({"kind": "PersistentVolumeClaim", "name": "data-lent"}, volumeName="pv-of-another-team"),
            "spec.volumeName: a Swarm's ephemeral volume is provisioned new",
        ),
        (
            _clone(
                {"kind": "PersistentVolumeClaim", "name": "data-lent"}, selector={"matchLabels": {"a": "b"}}
            ),
            "spec.selector: a Swarm's ephemeral volume is provisioned new",
        ),
        (
            {"imagePullSecrets": [{"name": "pull-lent"}, {"name": "pull-plain"}]},
            "podTemplate.spec.imagePullSecrets[1]: Secret 'pull-plain' may be used by a Swarm only when",
        ),
    ],
)
def test_each_borrowing_is_refused_naming_the_field_and_the_object(spec: dict[str, Any], said: str) -> None:
    found = _check(spec)
    assert len(found) == 1 and said in found[0], found


def test_labels_are_read_only_for_what_the_template_names_and_no_value_is_read() -> None:
    asked: list[tuple[str, str]] = []

    def claims(name: str) -> dict[str, str] | None:
        asked.append(("claim", name))
        return {}

    def secrets(name: str) -> dict[str, str] | None:
        asked.append(("secret", name))
        return LENT

    spec = {
        "imagePullSecrets": [{"name": "reg"}],
        "volumes": [
            {"name": "a", "persistentVolumeClaim": {"claimName": "one"}},
            {"name": "b", "emptyDir": {}},
        ],
    }
    found = refusals({"spec": spec}, TemplatePolicy(), NS, secrets, claims)
    assert asked == [("secret", "reg"), ("claim", "one")] and len(found) == 1
    # Without a way to read claims' labels, no claim is lent but the listed ones.
    assert len(refusals({"spec": spec}, TemplatePolicy(), NS, secrets)) == 1


def test_the_checkpoint_claim_and_a_provider_secret_are_lent_like_the_rest() -> None:
    said = borrowing.checkpoint_claim_refusal("ckpt", CLAIMS.get, frozenset())
    assert said is not None and said.startswith("checkpointStore.claim: PersistentVolumeClaim 'ckpt' ")
    assert borrowing.checkpoint_claim_refusal("data-lent", CLAIMS.get, frozenset()) is None
    assert borrowing.checkpoint_claim_refusal("ckpt", CLAIMS.get, frozenset({"ckpt"})) is None
    assert borrowing.checkpoint_claim_refusal(None, CLAIMS.get, frozenset()) is None
    said = borrowing.provider_refusal("harness.credentials", "anthropic", {"team": "a"}, frozenset())
    assert said is not None and "AGENTIHOOKS_WORKER_SECRETS" in said
    assert borrowing.provider_refusal("harness.credentials", "anthropic", LENT, frozenset()) is None
    assert borrowing.provider_refusal("harness.credentials", "x", {}, frozenset({"x"})) is None


def test_the_claims_setting_is_parsed() -> None:
    assert OperatorConfig(worker_claims=" a , b,").template_policy.claims == frozenset({"a", "b"})
    assert OperatorConfig().template_policy.claims == frozenset()
