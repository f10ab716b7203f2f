"""Every name the chart makes fits Kubernetes' limits, whatever release name Helm accepts.

Found as a cluster operator would (issue 47): ``helm template recovery-operator-staging1 ...`` gave a
53-character Redis StatefulSet, whose Pods' ``controller-revision-hash`` label (name + 11) would pass
63 characters, so the StatefulSet controller never made the Redis Pod while ``helm install`` said
deployed; at 28 characters the headless Service's name passed 63 and the install failed. Here the
chart is rendered with every feature that makes an object on, under release names up to Helm's own
limit of 53 characters and with a long ``fullnameOverride``, and each object's name is held to what
its kind allows. The same 53-character install runs on the real API server in
tests/integration/chart/test_helm_install_real.py.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from testsupport.helm import BASE_VALUES, CHART, NAMESPACE, Helm

#: Every optional object on (a ServiceMonitor, a PrometheusRule, an Ingress, the checkpoint claim...).
EVERYTHING: dict[str, Any] = {
    "ingress": {"enabled": True},
    "serviceMonitor": {"enabled": True, "prometheusNamespace": "monitoring"},
    "prometheusRule": {"enabled": True},
    "grafanaDashboard": {"enabled": True},
    "networkPolicy": {"enabled": True},
    "podDisruptionBudget": {"enabled": True},
    "operator": {"replicas": 2},
    "checkpointStore": {"mode": "root", "root": {"persistence": {"accessModes": ["ReadWriteMany"]}}},
}
DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
#: Kinds whose names end up in a label value, a DNS label or a Pod name prefix (limit, and why).
LIMITS = {
    "Service": 63,  # a DNS label
    "StatefulSet": 52,  # its Pods' controller-revision-hash label: <name>-<10 characters>
    "Job": 63,  # its Pods' job-name label
    "Deployment": 63,
    "CronJob": 52,
}
RELEASES = [
    "a",
    "agentihooks",
    "recovery-operator-staging1",  # the name the issue tried
    "agentihooks-recovery-prod",  # holds the chart's name: used as it is
    "r" * 53,  # Helm's own limit for a release name
    "recovery-operator-staging1-with-a-descriptive-suffix1",
]


def render(helm: Helm, release: str, *extra: str) -> list[dict[str, Any]]:
    import tempfile

    import yaml

    with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=helm.home, delete=False) as f:
        yaml.safe_dump(EVERYTHING, f)
    res = helm.run(
        "template", release, str(CHART), "--namespace", NAMESPACE, "--values", str(BASE_VALUES),
        "--values", f.name, *extra,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    return res.docs()


def names(docs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(d["kind"], d["metadata"]["name"]) for d in docs]


@pytest.mark.parametrize("release", RELEASES, ids=[f"{len(r)}-chars" for r in RELEASES])
def test_every_name_fits_its_kind_for_any_release_name(helm: Helm, release: str) -> None:
    docs = render(helm, release)
    assert {"StatefulSet", "Service", "Deployment"} <= {d["kind"] for d in docs}
    for kind, name in names(docs):
        assert len(name) <= LIMITS.get(kind, 253), f"{kind} {name!r}: {len(name)} characters"
        if kind == "Service":
            assert DNS_LABEL.fullmatch(name), f"Service {name!r} is not a DNS label"
    for doc in docs:  # every label value is a valid label value
        for key, value in ((doc.get("metadata") or {}).get("labels") or {}).items():
            assert len(str(value)) <= 63, f"{doc['kind']} label {key}={value!r}"


def test_long_names_are_cut_with_a_digest_so_two_releases_never_share_a_name(helm: Helm) -> None:
    one = "recovery-operator-staging1-with-a-descriptive-suffix1"
    two = "recovery-operator-staging1-with-a-descriptive-suffix2"
    # the Swarm CRD is the cluster's one, whatever the release: every other name is the release's own
    shared = {("CustomResourceDefinition", "swarms.agentihooks.io")}
    first, second = names(render(helm, one)), names(render(helm, two))
    assert (set(first) - shared).isdisjoint(set(second) - shared), "two long release names shared a name"
    [(_, sts)] = [n for n in first if n[0] == "StatefulSet"]
    assert sts.startswith("recovery-operator-staging1-with-a-desc") and sts.endswith("-redis")
    short = names(render(helm, "recovery"))
    assert ("Deployment", "recovery-agentihooks-recovery") in short  # short names are unchanged


def test_a_long_fullname_override_is_cut_the_same_way(helm: Helm) -> None:
    docs = render(helm, "rel", "--set", "fullnameOverride=" + "platform-agents-recovery-" * 4)
    for kind, name in names(docs):
        assert len(name) <= LIMITS.get(kind, 253), f"{kind} {name!r}"
    redis = next(d for d in docs if d["kind"] == "StatefulSet")
    service = redis["spec"]["serviceName"]
    assert any(kind == "Service" and name == service for kind, name in names(docs))
