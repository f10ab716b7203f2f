#!/usr/bin/env python3
"""Write the Helm chart's README.md from its template and the ``# --`` comments of values.yaml.

``helm show readme`` prints the chart's README.md, so it must say what the chart installs, how to
install, upgrade and uninstall it, and every value. The prose lives in
``charts/agentihooks-recovery/README.md.tmpl``; the values table is generated here from values.yaml,
where each value carries a ``# -- description`` comment (continued by the ``#`` lines under it) right
above its key. A documented key is one row, whatever its default holds (a map such as ``resources``
is shown whole); an undocumented key that holds a map is a section, and its keys are the rows.
``--check`` exits 1 when the committed README.md differs (tests/unit/chart/test_chart_readme.py).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))  # generated_file sits beside this script
from generated_file import arguments, write_or_check

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "agentihooks-recovery"
TEMPLATE = CHART / "README.md.tmpl"
TARGET = CHART / "README.md"
KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_.-]+):(?P<rest>.*)$")


class UndocumentedValue(Exception):
    """A value of values.yaml has no ``# --`` description on it or on a key above it."""


@dataclass(frozen=True)
class Row:
    key: str
    type: str
    default: Any
    description: str


def documented_keys(text: str) -> dict[str, str]:
    """``dotted.key`` → description, for every key of values.yaml with a ``# --`` comment."""
    found: dict[str, str] = {}
    stack: list[tuple[int, str]] = []  # (indent, key) of the enclosing keys
    pending: list[str] | None = None
    inside: int | None = None  # indent of a documented key whose value block is being skipped
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            pending = None
            continue
        indent = len(line) - len(line.lstrip(" "))
        if inside is not None:
            if indent > inside or (indent == inside and stripped.startswith("- ")):
                continue
            inside = None
        if stripped.startswith("#"):
            body = stripped[1:]
            if body.startswith(" --"):
                pending = [body[3:].strip()]
            elif pending is not None:
                pending.append(body.strip())
            continue
        match = KEY.match(line)
        if match is None:
            pending = None
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = ".".join([k for _, k in stack] + [match["key"]])
        if pending is not None:
            found[path] = " ".join(p for p in pending if p)
            pending = None
            if not match["rest"].strip():
                inside = indent  # a documented block: its content is the default, not more rows
            continue
        stack.append((indent, match["key"]))
    return found


def _lookup(values: dict[str, Any], dotted: str) -> Any:
    node: Any = values
    for part in dotted.split("."):
        node = node[part]
    return node


def _leaves(node: Any, prefix: str = "") -> list[str]:
    if isinstance(node, dict) and node:
        return [leaf for k, v in node.items() for leaf in _leaves(v, f"{prefix}.{k}" if prefix else k)]
    return [prefix]


def _type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    return "object"


def rows(values_text: str) -> list[Row]:
    """The table's rows, in values.yaml order; raises when a value has no description."""
    values: dict[str, Any] = yaml.safe_load(values_text)
    docs = documented_keys(values_text)
    missing = [
        leaf for leaf in _leaves(values) if not any(leaf == key or leaf.startswith(key + ".") for key in docs)
    ]
    if missing:
        raise UndocumentedValue("values without a `# --` description: " + ", ".join(missing))
    return [Row(key, _type(_lookup(values, key)), _lookup(values, key), text) for key, text in docs.items()]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _default(value: Any) -> str:
    return f"`{_cell(json.dumps(value, separators=(',', ':')))}`"


def table(values_text: str) -> str:
    lines = ["| Key | Type | Default | Description |", "|---|---|---|---|"]
    for row in rows(values_text):
        lines.append(f"| `{row.key}` | {row.type} | {_default(row.default)} | {_cell(row.description)} |")
    return "\n".join(lines)


def render() -> str:
    """The README's exact text."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    text = TEMPLATE.read_text(encoding="utf-8")
    fields = {
        "%%VERSION%%": str(chart["version"]),
        "%%APP_VERSION%%": str(chart["appVersion"]),
        "%%KUBE_VERSION%%": str(chart["kubeVersion"]),
        "%%DESCRIPTION%%": str(chart["description"]).strip(),
        "%%VALUES_TABLE%%": table((CHART / "values.yaml").read_text(encoding="utf-8")),
    }
    for token, value in fields.items():
        if token not in text:
            raise SystemExit(f"{TEMPLATE} lacks {token}")
        text = text.replace(token, value)
    header = "<!-- Generated by scripts/gen-chart-readme.py from README.md.tmpl and values.yaml. -->\n"
    return header + text


def main() -> int:
    args = arguments(__doc__, "README.md", TARGET)
    try:
        text = render()
    except UndocumentedValue as e:
        sys.stderr.write(f"{e}\n")
        return 1
    return write_or_check(args.target, text, check=args.check, script="gen-chart-readme.py")


if __name__ == "__main__":
    raise SystemExit(main())
