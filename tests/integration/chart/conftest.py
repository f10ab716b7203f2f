"""Fixtures of the chart integration tests: one pinned helm per session, with a throw-away HOME."""

from __future__ import annotations

import pytest
from testsupport.helm import Helm, make_helm


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return make_helm(tmp_path_factory.mktemp("helm"))


@pytest.fixture(scope="session")
def helm3(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """Helm 3 (v3.17.2): the chart is tested with both majors."""
    return make_helm(tmp_path_factory.mktemp("helm3"), "helm3")
