"""``make dist`` builds the release artefacts: the wheel (from the sdist), the sdist and the chart.

The recipe runs as ``make`` runs it (``install`` marked as done with ``-o``: this environment is the
one it would make), into a temporary ``DIST`` folder, and each artefact is opened and checked.
"""

from __future__ import annotations

import email.parser
import os
import subprocess
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml
from testsupport.helm import CHART, ROOT, find_tool

pytestmark = pytest.mark.slow

VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    helm = find_tool("helm")
    out = tmp_path_factory.mktemp("dist") / "dist"
    home = tmp_path_factory.mktemp("home")
    res = subprocess.run(
        ["make", "--no-print-directory", "-o", "install", "dist", f"DIST={out}", f"HELM={helm}"],
        cwd=ROOT,
        env={**os.environ, "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return out


def test_three_artefacts(dist: Path) -> None:
    assert sorted(p.name for p in dist.iterdir()) == [
        f"agentihooks-recovery-{VERSION}.tgz",
        f"agentihooks_recovery-{VERSION}-py3-none-any.whl",
        f"agentihooks_recovery-{VERSION}.tar.gz",
    ]


def test_wheel(dist: Path) -> None:
    with zipfile.ZipFile(dist / f"agentihooks_recovery-{VERSION}-py3-none-any.whl") as z:
        names = set(z.namelist())
        info = f"agentihooks_recovery-{VERSION}.dist-info"
        meta = email.parser.Parser().parsestr(z.read(f"{info}/METADATA").decode())
        entry_points = z.read(f"{info}/entry_points.txt").decode()
        license_text = z.read(f"{info}/licenses/LICENSE")
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta["License-File"] == "LICENSE"
    assert license_text == (ROOT / "LICENSE").read_bytes()
    assert "Homepage, https://github.com/" in str(meta.get_all("Project-URL"))
    for script in ("agentihooks", "agentihooks-operator", "agentihooks-worker"):
        assert f"\n{script} = " in "\n" + entry_points
    assert "agentihooks-demo" not in entry_points
    assert not [n for n in names if n.startswith("agentihooks_demo/")], "the demo needs a checkout"
    for module in (
        "agentihooks_operator/uninstall.py",
        "agentihooks_operator/ledger/static/ledger.js",
        "agentihooks_checkpoint/py.typed",
        "agentihooks_worker/cli.py",
    ):
        assert module in names, module


def test_sdist(dist: Path) -> None:
    with tarfile.open(dist / f"agentihooks_recovery-{VERSION}.tar.gz") as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {"LICENSE", "README.md", "pyproject.toml", "PKG-INFO"} <= names
    assert "operator/agentihooks_operator/main.py" in names
    assert "worker/agentihooks_worker/cli.py" in names


def test_chart_archive(dist: Path) -> None:
    with tarfile.open(dist / f"agentihooks-recovery-{VERSION}.tgz") as tar:
        names = set(tar.getnames())
        chart = yaml.safe_load(tar.extractfile("agentihooks-recovery/Chart.yaml").read())  # type: ignore[union-attr]
        readme = tar.extractfile("agentihooks-recovery/README.md").read()  # type: ignore[union-attr]
    assert chart["version"] == VERSION and chart["appVersion"] == VERSION
    assert chart["home"] and chart["icon"].startswith("data:image/svg+xml;base64,")
    assert readme == (CHART / "README.md").read_bytes()
    for path in (
        "files/crds/swarms.agentihooks.io.yaml",
        "templates/crds.yaml",
        "values.schema.json",
        "values.yaml",
        "templates/uninstall-hook.yaml",
    ):
        assert f"agentihooks-recovery/{path}" in names
    assert not [n for n in names if "/ci/" in n or n.endswith(".tmpl")]
