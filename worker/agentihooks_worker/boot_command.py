"""``agentihooks-worker boot``: the Pod entrypoint as a command (settings from the environment)."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from . import logs
from .boot import Boot
from .errors import EXIT_REFUSED
from .hardening import keep_children_out
from .report import emit, event_line
from .settings import WorkerSettings


def boot_command(
    launch_record: Annotated[
        Path | None,
        typer.Option(help="Launch record file (default: AGENTIHOOKS_LAUNCH_RECORD or the mount)."),
    ] = None,
    attempts_dir: Annotated[
        Path | None, typer.Option(help="Folder of attempt folders (default: AGENTIHOOKS_ATTEMPTS_DIR).")
    ] = None,
) -> None:
    """Verify and restore this attempt's checkpoint, then run the harness under the supervisor."""
    try:
        logs.configure(os.environ.get("AGENTIHOOKS_LOG_FORMAT", "text"))
    except ValueError as e:
        logs.configure("text")
        emit(event_line("boot_failed", error=str(e)))
        raise typer.Exit(EXIT_REFUSED) from e
    for noisy in ("httpx", "httpcore"):  # a line per request, URL and all; the client says when it retries
        logging.getLogger(noisy).setLevel(logging.WARNING)
    keep_children_out()  # before the credential is read: the harness may not read it from us
    try:
        settings = WorkerSettings()
    except ValidationError as e:
        names = ", ".join(".".join(map(str, err["loc"])) for err in e.errors())
        emit(event_line("boot_failed", error=f"invalid worker settings: {names}"))
        raise typer.Exit(EXIT_REFUSED) from e
    overrides: dict[str, Path] = {}
    if launch_record is not None:
        overrides["launch_record"] = launch_record
    if attempts_dir is not None:
        overrides["attempts_dir"] = attempts_dir
    if overrides:
        settings = settings.model_copy(update=overrides)
    raise typer.Exit(Boot(settings).run())
