"""Entry point of the ``agentihooks`` command; command groups register themselves here."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="agentihooks",
    help="Talk to the agentihooks recovery controller.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """agentihooks: restore decisions, status and recovery controls for swarms."""


def main() -> None:
    """Console-script entry point."""
    app()
