"""``-o json|yaml|wide`` on every command, as kubectl users type it, against a live control API."""

from __future__ import annotations

import json
from typing import Any

import yaml
from agentihooks_operator.cli.main import app
from testsupport.control_api import MASTER_A, World
from typer.main import get_command

from .test_swarm_commands import one_error_line


def _commands(group: Any, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Every leaf command under ``group`` (typer's click may be its own copy: duck-typed)."""
    ctx = type(group).context_class(group)
    found: dict[tuple[str, ...], Any] = {}
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        assert cmd is not None
        if hasattr(cmd, "list_commands"):
            found.update(_commands(cmd, (*path, name)))
        else:
            found[(*path, name)] = cmd
    return found


def test_every_command_takes_dash_o() -> None:
    commands = _commands(get_command(app))
    assert len(commands) >= 12, sorted(commands)
    for path, cmd in commands.items():
        opts = {o for p in cmd.params for o in getattr(p, "opts", [])}
        assert {"-o", "--output"} <= opts, f"{' '.join(path)} has no -o"


def test_status_in_each_format(world: World, cli) -> None:  # type: ignore[no-untyped-def]
    eid = world.fail()
    built = world.checkpoint(eid)
    op = world.tokens["operator"]
    as_json = json.loads(cli("swarm", "swarm-a", "status", "-o", "json", token=op).output)
    as_yaml = yaml.safe_load(cli("swarm", "swarm-a", "status", "-o", "yaml", token=op).output)
    assert as_yaml == as_json and as_json["handoffs"][0]["checkpoint"] == built.checkpoint_id
    assert json.loads(cli("swarm", "swarm-a", "status", "--json", token=op).output) == as_json
    wide = cli("swarm", "swarm-a", "status", "-o", "wide", token=op)
    assert wide.exit_code == 0 and wide.output == cli("swarm", "swarm-a", "status", "--wide", token=op).output
    assert "AWAITING" in wide.output and "AWAITING" not in cli("swarm", "swarm-a", "status", token=op).output
    assert yaml.safe_load(cli("swarm", "swarm-a", "status", "-o", "YAML", token=op).output) == as_json


def test_formats_that_contradict_or_do_not_exist_are_refused(world: World, cli) -> None:  # type: ignore[no-untyped-def]
    op = world.tokens["operator"]
    r = cli("swarm", "swarm-a", "status", "--json", "-o", "yaml", token=op)
    assert r.exit_code == 2 and "--json and -o yaml ask for two formats" in r.output
    r = cli("swarm", "swarm-a", "status", "-o", "xml", token=op)
    assert r.exit_code == 2 and "'xml' is not one of" in r.output


def test_actions_print_the_apis_answer(world: World, cli) -> None:  # type: ignore[no-untyped-def]
    eid = world.fail()
    world.checkpoint(eid)
    r = cli(
        "swarm", "swarm-a", "restore-decision", "eng-1", "resume", "-o", "json", token=world.tokens[MASTER_A]
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["execution_id"] == eid
    r = cli("swarm", "swarm-b", "pause", "-o", "yaml", token=world.tokens["operator"])
    assert r.exit_code == 0 and yaml.safe_load(r.output)["paused"] is True
    r = cli("swarm", "swarm-b", "unpause", "-o", "json", token=world.tokens["operator"])
    assert json.loads(r.output)["paused"] is False
    r = cli("swarm", "list", "-o", "yaml", token=world.tokens["operator"])
    assert [s["swarm"] for s in yaml.safe_load(r.output)["swarms"]] == ["swarm-a", "swarm-b"]
    r = cli("swarm", "swarm-a", "recoveries", "-o", "json", token=world.tokens["operator"])
    assert json.loads(r.output)["recoveries"] == []  # nothing held
    # an error is one line on stderr whatever -o says, never a document
    r = cli("swarm", "swarm-a", "pause", "-o", "json", token=world.tokens[MASTER_A])
    assert r.exit_code == 1 and "forbidden_scope" in one_error_line(r.output)


def test_events_as_json_lines_and_yaml_documents(world: World, cli) -> None:  # type: ignore[no-untyped-def]
    eid = world.fail()
    world.checkpoint(eid)
    token = world.tokens[MASTER_A]
    lines = cli("swarm", "swarm-a", "events", "-o", "json", token=token).output.splitlines()
    events = [json.loads(line) for line in lines]
    assert events and any(e.get("execution_id") == eid for e in events)
    docs = list(yaml.safe_load_all(cli("swarm", "swarm-a", "events", "-o", "yaml", token=token).output))
    assert docs == events
    r = cli("swarm", "swarm-a", "checkpoints", "eng-1", "-o", "yaml", token=token)
    assert r.exit_code == 0 and yaml.safe_load(r.output) == json.loads(
        cli("swarm", "swarm-a", "checkpoints", "eng-1", "-o", "json", token=token).output
    )
