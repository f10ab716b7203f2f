"""Chart.yaml carries what chart indexes and ``helm show chart`` readers expect, and lints strictly."""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET

import yaml
from testsupport.helm import CHART, NAMESPACE, ROOT, Helm

CHART_YAML = yaml.safe_load((CHART / "Chart.yaml").read_text())
ICON = ROOT / "docs" / "assets" / "icon.svg"


def test_metadata_fields() -> None:
    home = CHART_YAML["home"]
    assert re.fullmatch(r"https://github\.com/[\w.-]+/agentihooks-recovery", home)
    assert home in CHART_YAML["sources"]
    assert CHART_YAML["maintainers"] and all(m["name"] for m in CHART_YAML["maintainers"])
    assert {"operator", "kopf", "recovery"} <= set(CHART_YAML["keywords"])
    assert CHART_YAML["kubeVersion"] == ">=1.30.0-0"
    assert CHART_YAML["annotations"]["artifacthub.io/license"] == "Apache-2.0"


def test_icon_is_the_repositorys_svg_as_a_data_url() -> None:
    prefix = "data:image/svg+xml;base64,"
    icon = CHART_YAML["icon"]
    assert icon.startswith(prefix)
    assert base64.b64decode(icon.removeprefix(prefix)) == ICON.read_bytes()
    root = ET.fromstring(ICON.read_bytes())
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert len(ICON.read_bytes()) < 4096, "a small icon: it travels inside Chart.yaml"


def test_home_matches_the_python_package_and_the_images() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["urls"]["Homepage"] == CHART_YAML["home"]
    for name in ("Dockerfile.operator", "Dockerfile.worker"):
        text = (ROOT / "deploy" / name).read_text()
        assert f'org.opencontainers.image.source="{CHART_YAML["home"]}"' in text


def test_lint_strict_has_nothing_to_say(helm: Helm) -> None:
    res = helm.run("lint", "--strict", str(CHART), "--namespace", NAMESPACE)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "[INFO]" not in res.stdout and "[WARNING]" not in res.stdout, res.stdout


def test_helm_show_chart_prints_the_metadata(helm: Helm) -> None:
    res = helm.run("show", "chart", str(CHART))
    assert res.returncode == 0, res.stderr
    shown = yaml.safe_load(res.stdout)
    assert shown["home"] == CHART_YAML["home"] and shown["icon"] == CHART_YAML["icon"]
