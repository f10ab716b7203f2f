"""``-o json|yaml|wide``: one output option, in kubectl's habits, for every command.

Without ``-o`` a command prints its text (a table, or one line saying what was
done); ``-o wide`` prints every column, nothing cut, where a command has a
table (elsewhere it is the text); ``-o json`` and ``-o yaml`` print the control
API's document as it answered (for ``events``, one JSON object per line, or
YAML documents separated by ``---``). ``--json`` is kept as the older spelling
of ``-o json``. Errors are never formatted: one ``error:`` line on stderr and
the exit code, whatever ``-o`` says.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from enum import StrEnum
from typing import Annotated, Any

import typer
import yaml


class Format(StrEnum):
    text = "text"
    wide = "wide"
    json = "json"
    yaml = "yaml"


OutputOption = Annotated[
    Format,
    typer.Option(
        "-o",
        "--output",
        case_sensitive=False,
        help="json or yaml (the API's document), wide (every column), or text.",
    ),
]
#: The older spelling of ``-o json``, kept for scripts written against it.
JsonFlag = Annotated[bool, typer.Option("--json", hidden=True, help="The same as -o json.")]


def chosen(output: Format, as_json: bool = False) -> Format:
    if as_json and output not in (Format.text, Format.json):
        raise typer.BadParameter(
            f"--json and -o {output.value} ask for two formats; give one", param_hint="-o"
        )
    return Format.json if as_json else output


def document(body: Any, fmt: Format) -> str:
    """``body`` as a JSON or YAML document (keys sorted, as the API has no order to keep)."""
    if fmt is Format.yaml:
        return yaml.safe_dump(body, sort_keys=True, allow_unicode=True, default_flow_style=False).rstrip("\n")
    return json.dumps(body, indent=2, sort_keys=True)


def emit(body: Any, fmt: Format, text: Callable[[bool], str]) -> None:
    """Print ``body`` in ``fmt``; ``text(wide)`` renders the human forms."""
    if fmt in (Format.json, Format.yaml):
        typer.echo(document(body, fmt))
    else:
        typer.echo(text(fmt is Format.wide))


def emit_item(item: Any, fmt: Format, line: Callable[[Any], str], *, first: bool) -> None:
    """One item of a stream (``events``): a JSON line, a YAML document, or the item's text line."""
    if fmt is Format.json:
        typer.echo(json.dumps(item, sort_keys=True))
    elif fmt is Format.yaml:
        typer.echo(("" if first else "---\n") + document(item, fmt))
    else:
        typer.echo(line(item))
