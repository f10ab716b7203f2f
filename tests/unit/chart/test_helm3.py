"""The chart under Helm 3 (v3.17.2) renders what it renders under Helm 4 (issue 47).

docs/install.md promises Helm 3 as well as Helm 4, and the two differ in template functions and
defaults. Every value set under ci/ (plus a long release name and the CRD left out) renders the same
objects under both, and both lint the chart clean. The generated Redis password is random per render,
so the renders name an existing Secret; the real install with Helm 3 is in
tests/integration/chart/test_helm3_real.py.
"""

from __future__ import annotations

import pytest
from testsupport.helm import Helm, value_sets

SETS = value_sets()
PINNED = {"redis": {"auth": {"existingSecret": "agentihooks-redis"}}}


@pytest.mark.parametrize("name", sorted(SETS), ids=sorted(SETS))
def test_every_value_set_renders_the_same_under_helm_3_and_helm_4(helm: Helm, helm3: Helm, name: str) -> None:
    four = helm.render(SETS[name], "--values", str(_pinned(helm)))
    three = helm3.render(SETS[name], "--values", str(_pinned(helm3)))
    assert three == four


def test_a_long_release_name_and_no_crd_render_the_same_too(helm: Helm, helm3: Helm) -> None:
    values = {**PINNED, "crds": {"enabled": False}, "fullnameOverride": "x" * 60}
    assert helm3.render(values) == helm.render(values)


def test_helm_3_lints_the_chart_clean(helm3: Helm) -> None:
    from testsupport.helm import BASE_VALUES, CHART

    res = helm3.run("lint", str(CHART), "--values", str(BASE_VALUES), "--strict")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in res.stdout


def test_helm_3_refuses_a_bad_value_naming_it(helm3: Helm) -> None:
    res = helm3.template({"crds": {"keep": "yes"}})
    assert res.returncode != 0 and "keep" in res.stderr, res.stderr


def _pinned(helm: Helm) -> object:
    import yaml

    path = helm.home / "pinned-secret.yaml"
    path.write_text(yaml.safe_dump(PINNED))
    return path
