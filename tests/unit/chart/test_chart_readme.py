"""The chart's README (what ``helm show readme`` prints) is generated from values.yaml and up to date."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from testsupport.helm import CHART, ROOT, Helm

SCRIPT = ROOT / "scripts" / "gen-chart-readme.py"
README = CHART / "README.md"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_chart_readme", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_committed_readme_is_the_scripts_output() -> None:
    res = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert README.read_text() == _script().render()


def test_check_detects_drift_and_regenerates(tmp_path: Path) -> None:
    stale = tmp_path / "README.md"
    stale.write_text(README.read_text().replace("| `operator.replicas` | int | `1` |", "| x |"))
    res = subprocess.run(
        [sys.executable, str(SCRIPT), "--check", "--target", str(stale)], capture_output=True, text=True
    )
    assert res.returncode == 1 and "is stale: run scripts/gen-chart-readme.py" in res.stderr
    subprocess.run([sys.executable, str(SCRIPT), "--target", str(stale)], check=True, capture_output=True)
    assert stale.read_text() == README.read_text()


def test_helm_show_readme_prints_it(helm: Helm) -> None:
    res = helm.run("show", "readme", str(CHART))
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == README.read_text().strip()


def test_readme_says_what_a_user_needs() -> None:
    text = README.read_text()
    for section in ("## What it installs", "## Prerequisites", "## Install", "## Upgrade", "## Uninstall"):
        assert section in text
    for command in ("helm install agentihooks", "helm upgrade agentihooks", "helm uninstall agentihooks"):
        assert command in text
    assert "%%" not in text, "every template field is filled"


def test_every_value_has_a_row_with_its_default() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    text = README.read_text()
    assert "| `operator.replicas` | int | `1` |" in text
    assert '| `redis.embedded.image.tag` | string | `"' + values["redis"]["embedded"]["image"]["tag"] in text
    assert "| `uninstallHook.enabled` | bool | `true` |" in text
    # a documented block is one row holding its whole default
    assert '| `operator.resources` | object | `{"requests":{"cpu":"100m"' in text
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert len(rows) > 60


def test_parser_reads_continuations_and_blocks() -> None:
    gen = _script()
    text = """\
# header, not a description

top:
  # -- First line
  # continued.
  leaf: 1
  # a plain comment is not a description
  section:
    # -- A block shown whole.
    block:
      inner: x
      list:
        - a
    # -- After the block.
    after: true
"""
    assert gen.documented_keys(text) == {
        "top.leaf": "First line continued.",
        "top.section.block": "A block shown whole.",
        "top.section.after": "After the block.",
    }
    table = gen.table(text)
    assert '| `top.section.block` | object | `{"inner":"x","list":["a"]}` | A block shown whole. |' in table


def test_an_undocumented_value_is_refused() -> None:
    gen = _script()
    with pytest.raises(gen.UndocumentedValue, match=r"top\.secret"):
        gen.rows("top:\n  # -- Documented.\n  ok: 1\n  secret: 2\n")
