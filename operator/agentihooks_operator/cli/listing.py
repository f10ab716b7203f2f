"""``agentihooks swarm list``: the swarms the caller may see (``GET /v1/swarms``).

Every other ``swarm`` command names a Swarm first (``agentihooks swarm NAME
COMMAND``). :class:`SwarmGroup` reads ``swarm list`` (alone or followed by
``list``'s own options) as this command; a Swarm that is itself named ``list``
is still reached with a command after its name (``agentihooks swarm list
status``).
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperGroup

from . import render
from .client import CliError
from .output import Format, JsonFlag, OutputOption, chosen, emit
from .swarm import _client, run

LIST = "list"
#: Stands for the Swarm name when ``swarm list`` is read as the listing (never a valid name).
_NO_SWARM = "\x00"
_META = "agentihooks.swarm_list"


class SwarmGroup(TyperGroup):
    """The ``swarm`` group: ``swarm list [OPTIONS]`` lists, ``swarm NAME COMMAND`` acts on NAME."""

    # ``ctx`` is typed Any: typer >= 0.24 passes its vendored click's Context, older ones click's own.
    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args[:1] == [LIST] and (len(args) == 1 or args[1] not in self.commands):
            ctx.meta[_META] = True
            args = [_NO_SWARM, *args]
        return super().parse_args(ctx, _namespace_first(args))


def _namespace_first(args: list[str]) -> list[str]:
    """``NAME -n NS COMMAND ...`` read as ``-n NS NAME COMMAND ...`` (a group stops reading its own
    options at its argument; kubectl users put ``-n`` after the name)."""
    if len(args) >= 3 and not args[0].startswith("-") and args[1] in ("-n", "--namespace"):
        return [args[1], args[2], args[0], *args[3:]]
    if len(args) >= 2 and not args[0].startswith("-") and args[1].startswith("--namespace="):
        return [args[1], args[0], *args[2:]]
    return args


def swarms_text(body: dict[str, Any]) -> str:
    listed = body.get("swarms", [])
    if not listed:
        return "no swarms"
    rows = [
        [s.get("namespace", ""), s.get("swarm"), len(s.get("seats", [])), ", ".join(s.get("seats", []))]
        for s in listed
    ]
    return render.table(
        ["NAMESPACE", "SWARM", "SEATS", "SEAT NAMES"], rows, width=render.WIDTH, shrink={"SEAT NAMES": 10}
    )


def swarm_list(
    ctx: typer.Context,
    output: OutputOption = Format.text,
    as_json: JsonFlag = False,
) -> None:
    """The swarms you may see: all for the operator token, a master's own ones (agentihooks swarm list);
    with -n, those of that namespace."""

    def body() -> None:
        if not ctx.meta.get(_META):
            raise CliError("list takes no swarm name: run `agentihooks swarm list`")
        b = _client(ctx).call("GET", "/v1/swarms").body
        wanted = (ctx.find_object(dict) or {}).get("namespace")  # -n given: that namespace only
        if wanted:
            b = {**b, "swarms": [s for s in b.get("swarms", []) if s.get("namespace") == wanted]}
        emit(b, chosen(output, as_json), lambda _: swarms_text(b))

    run(body)


def register(app: typer.Typer) -> None:
    """Add ``list`` to the ``swarm`` group (give the group :class:`SwarmGroup` as its class)."""
    app.command(LIST)(swarm_list)
