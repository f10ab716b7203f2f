"""``agentihooks-worker``: the worker Pod's entrypoint (subcommands register here)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Annotated

import typer

app = typer.Typer(
    name="agentihooks-worker",
    help="Boot, restore and supervise an agent worker.",
    no_args_is_help=True,
    add_completion=False,
)


#: The distribution the worker ships in (the same wheel as the operator and the CLI).
DISTRIBUTION = "agentihooks-recovery"


def package_version() -> str:
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # a source tree that was never installed
        return "unknown (not installed)"


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"agentihooks-worker {package_version()}")
        raise typer.Exit()


@app.callback()
def _root(
    _version: Annotated[
        bool,
        typer.Option("--version", callback=_show_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """agentihooks-worker: worker entrypoint."""


from .capture.command import capture_command  # noqa: E402

app.command("capture")(capture_command)

from .boot_command import boot_command  # noqa: E402

app.command("boot")(boot_command)


def main() -> None:
    """Console-script entry point."""
    app()
