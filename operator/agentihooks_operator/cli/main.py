"""Entry point of the ``agentihooks`` command; command groups register themselves here.

The control URL and token come from ``--control-url``/``--token`` or from
``AGENTIHOOKS_CONTROL_URL``/``AGENTIHOOKS_TOKEN``. ``agentihooks admin ...``
talks to Redis instead (``--redis-url``/``AGENTIHOOKS_REDIS_URL``).
"""

from __future__ import annotations

from typing import Annotated

import typer

from . import admin, recoveries, swarm

app = typer.Typer(
    name="agentihooks",
    help="Talk to the agentihooks recovery controller.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root(
    ctx: typer.Context,
    control_url: Annotated[
        str | None,
        typer.Option("--control-url", envvar="AGENTIHOOKS_CONTROL_URL", help="The controller's API URL."),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token", envvar="AGENTIHOOKS_TOKEN", help="Operator or master token.", show_default=False
        ),
    ] = None,
) -> None:
    """agentihooks: restore decisions, status and recovery controls for swarms."""
    obj = ctx.ensure_object(dict)
    obj["url"], obj["token"] = control_url, token


recoveries.register(swarm.app)
app.add_typer(swarm.app, name="swarm")
admin.register(app)


def main() -> None:
    """Console-script entry point."""
    app()
