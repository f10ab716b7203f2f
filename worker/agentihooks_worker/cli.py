"""``agentihooks-worker``: the worker Pod's entrypoint (subcommands register here)."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="agentihooks-worker",
    help="Boot, restore and supervise an agent worker.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """agentihooks-worker: worker entrypoint."""


from .capture.command import capture_command  # noqa: E402

app.command("capture")(capture_command)

from .boot_command import boot_command  # noqa: E402

app.command("boot")(boot_command)


def main() -> None:
    """Console-script entry point."""
    app()
