"""What the chart hands the operator is what the operator reads.

Every ``AGENTIHOOKS_*`` variable the chart renders must be a setting of the operator
(``OperatorConfig``), of its control API (``ApiConfig``) or of the checkpoint store chosen from the
environment; the rendered values must parse with those very settings classes; and the labels the
NetworkPolicy selects worker Pods by must be the labels the operator puts on them.
"""

from __future__ import annotations

import os
import re
from typing import Any

import pytest
from agentihooks_checkpoint.stores import env as store_env
from agentihooks_operator.api.config import ApiConfig
from agentihooks_operator.k8s.building.pods import label
from agentihooks_operator.k8s.config import OperatorConfig
from testsupport.helm import Helm, by_kind, one, value_sets

STORE_VARS = {store_env.BUCKET, store_env.ROOT, store_env.ENDPOINT, store_env.PREFIX}
OTHER_VARS: set[str] = set()
SECRETS = {
    name: "s3cr3t"
    for name in (
        "agentihooks-redis",
        "agentihooks-redis-sentinel",
        "agentihooks-operator-token",
        "agentihooks-s3",
        "rel-agentihooks-recovery-redis-auth",
    )
}


def _known() -> set[str]:
    fields = set(OperatorConfig.model_fields) | set(ApiConfig.model_fields)
    return {f"AGENTIHOOKS_{name.upper()}" for name in fields} | STORE_VARS | OTHER_VARS


def _operator(helm: Helm, value_set: str) -> dict[str, Any]:
    pod = one(helm.render(value_sets()[value_set]), "Deployment")["spec"]["template"]["spec"]
    container: dict[str, Any] = pod["containers"][0]
    return container


def _literal_env(container: dict[str, Any], secrets: dict[str, str]) -> dict[str, str]:
    """The container environment as the kubelet would build it (Secret values from ``secrets``)."""
    out: dict[str, str] = {}
    for var in container["env"]:
        if "value" in var:
            out[var["name"]] = re.sub(r"\$\((\w+)\)", lambda m: out.get(m.group(1), m.group(0)), var["value"])
        elif "secretKeyRef" in var.get("valueFrom", {}):
            out[var["name"]] = secrets[var["valueFrom"]["secretKeyRef"]["name"]]
        elif "fieldRef" in var.get("valueFrom", {}):
            out[var["name"]] = "operator-pod-0"
    return out


@pytest.mark.parametrize("name", sorted(value_sets()))
def test_every_rendered_setting_is_one_the_operator_reads(helm: Helm, name: str) -> None:
    container = one(helm.render(value_sets()[name]), "Deployment")["spec"]["template"]["spec"]["containers"][
        0
    ]
    rendered = {e["name"] for e in container["env"] if e["name"].startswith("AGENTIHOOKS_")}
    assert rendered - _known() == set()


@pytest.mark.parametrize("name", sorted(value_sets()))
def test_rendered_settings_parse(helm: Helm, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _literal_env(_operator(helm, name), SECRETS)
    for key in [k for k in os.environ if k.startswith("AGENTIHOOKS_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    op = OperatorConfig()
    api = ApiConfig()
    assert op.operator_id == "operator-pod-0"
    assert api.control_port == 8080
    assert api.checkpoint_object_cap == 2 * 1024**3
    assert op.redis_url.startswith(("redis://", "rediss://", "redis+sentinel://", "rediss+cluster://"))
    if "AGENTIHOOKS_REDIS_PASSWORD" in env:
        assert op.redis_password is not None and op.redis_password.get_secret_value() == "s3cr3t"
        assert "s3cr3t" not in op.redis_url, "the password travels apart from the URL"
    if "AGENTIHOOKS_OPERATOR_TOKEN" in env:
        assert api.operator_hash() is not None


def test_network_policy_selects_workers_by_the_operators_pod_label(helm: Helm) -> None:
    docs = helm.render(value_sets()["bucket-store"])
    policy = next(p for p in by_kind(docs, "NetworkPolicy") if p["metadata"]["name"].endswith("recovery"))
    worker_peers = [peer for peer in policy["spec"]["ingress"][0]["from"] if "namespaceSelector" in peer]
    assert worker_peers
    for peer in worker_peers[:1]:
        [expr] = peer["podSelector"]["matchExpressions"]
        assert expr == {"key": label("execution-id"), "operator": "Exists"}
