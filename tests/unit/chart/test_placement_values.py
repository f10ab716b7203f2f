"""The chart's ``operator.placement`` values reach the operator as the settings it reads."""

from __future__ import annotations

from typing import Any

import pytest
from agentihooks_operator.k8s.config import OperatorConfig
from testsupport.helm import Helm, one


def _env(helm: Helm, values: dict[str, Any] | None = None) -> dict[str, str]:
    container = one(helm.render(values), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


def _config(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> OperatorConfig:
    for name, value in env.items():
        if name.startswith("AGENTIHOOKS_PLACEMENT"):
            monkeypatch.setenv(name, value)
    return OperatorConfig(lease_ms=15000)


def test_by_default_replicas_share_swarms_with_the_derived_heartbeat(
    helm: Helm, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = _env(helm)
    assert "AGENTIHOOKS_PLACEMENT_HEARTBEAT_SECONDS" not in env
    config = _config(env, monkeypatch)
    assert (config.placement, config.heartbeat_seconds, config.placement_hold_seconds) == (True, 2.0, 30.0)


def test_placement_values_are_passed_on(helm: Helm, monkeypatch: pytest.MonkeyPatch) -> None:
    values = {"operator": {"placement": {"enabled": False, "heartbeatSeconds": 0.5, "holdSeconds": 5}}}
    config = _config(_env(helm, values), monkeypatch)
    assert (config.placement, config.heartbeat_seconds, config.placement_hold_seconds) == (False, 0.5, 5.0)


def test_an_unknown_placement_key_is_refused(helm: Helm) -> None:
    res = helm.template({"operator": {"placement": {"holdSecond": 5}}})
    assert res.returncode != 0 and "'holdSecond' not allowed" in res.stderr
