"""The CLI against a live control API (real aiohttp server, real Redis), through typer's CliRunner."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from agentihooks_operator.cli.main import app
from click.testing import Result
from testsupport.control_api import World, make_world
from typer.testing import CliRunner


@pytest.fixture
def world(redis_url: str, tmp_path: Path) -> Iterator[World]:
    with make_world(redis_url, tmp_path) as w:
        yield w


@pytest.fixture
def cli(world: World) -> Callable[..., Result]:
    """``cli("swarm", "swarm-a", "status", token=...)``: run the command with env URL and token."""
    runner = CliRunner()

    def invoke(*args: str, token: str | None = None, url: str | None = None) -> Result:
        env = {"AGENTIHOOKS_CONTROL_URL": url or world.url, "AGENTIHOOKS_TOKEN": token or ""}
        return runner.invoke(app, list(args), env=env)

    return invoke
