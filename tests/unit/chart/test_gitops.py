"""The chart under GitOps: two renders of the same values are the same manifests (issue 47).

Argo CD renders with ``helm template``, where ``lookup`` finds nothing, so a password the chart
generates would change at every render and never be in sync. With ``redis.auth.existingSecret`` the
renders are identical; without it, the only difference is that one Secret's data (docs/install.md,
"GitOps", says how to keep it).
"""

from __future__ import annotations

from typing import Any

from testsupport.helm import Helm


def _keyed(docs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def test_two_renders_with_an_existing_redis_secret_are_identical(helm: Helm) -> None:
    values = {"redis": {"auth": {"existingSecret": "agentihooks-redis"}}}
    first, second = helm.render(values), helm.render(values)
    assert first == second
    assert not [d for d in first if d["kind"] == "Secret"], "no Secret is rendered: the user's is named"


def test_without_it_only_the_generated_password_differs(helm: Helm) -> None:
    first, second = _keyed(helm.render()), _keyed(helm.render())
    assert first.keys() == second.keys()
    differ = sorted(key for key in first if first[key] != second[key])
    assert len(differ) == 1 and differ[0][0] == "Secret" and differ[0][1].endswith("-redis-auth"), differ
    (key,) = differ
    assert {**first[key], "data": None} == {**second[key], "data": None}
