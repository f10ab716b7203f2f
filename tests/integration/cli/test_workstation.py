"""What a workstation user meets first: ``--version``, completion, ``swarm list``, a status table that
fits 120 columns (``--wide`` for all), and an unknown token told apart from a token without the right.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from agentihooks_operator.cli.render import WIDTH
from testsupport.control_api import MASTER_A, MASTER_B, World

from .test_swarm_commands import one_error_line

BIN = Path(sys.executable).parent


def test_version_is_the_package_version(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("--version")
    assert r.exit_code == 0, r.output
    assert r.output.strip() == f"agentihooks {version('agentihooks-recovery')}"


def test_swarm_list_shows_what_the_caller_may_see(world: World, cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("swarm", "list", token=world.tokens["operator"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0].split() == ["NAMESPACE", "SWARM", "SEATS", "SEAT", "NAMES"]
    assert [line.split()[:2] for line in lines[1:]] == [["default", "swarm-a"], ["default", "swarm-b"]]
    assert (
        cli("-n", "elsewhere", "swarm", "list", token=world.tokens["operator"]).output.strip() == "no swarms"
    )
    r = cli("swarm", "list", token=world.tokens[MASTER_A])
    assert r.exit_code == 0, r.output
    assert "swarm-a" in r.output and "swarm-b" not in r.output
    r = cli("swarm", "list", "--json", token=world.tokens[MASTER_B])
    assert r.exit_code == 0, r.output
    body = json.loads(r.output)
    assert [s["swarm"] for s in body["swarms"]] == ["swarm-b"]
    assert body["swarms"][0]["seats"] == [s.name for s in world.specs["swarm-b"].seats]


def test_swarm_list_refusals_tell_unknown_from_forbidden(world: World, cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("swarm", "list", token="never-issued-token")
    assert r.exit_code == 1
    line = one_error_line(r.output)
    assert line == "error: the controller did not accept the token (unknown or revoked token)"
    r = cli("swarm", "list", token="")
    assert "no token was sent" in one_error_line(r.output) and r.exit_code == 1
    worker = world.launcher.pods[world.first["swarm-a"].execution_id].worker_token.get_secret_value()
    r = cli("swarm", "list", token=worker)  # known to the controller, but no reader of swarms
    assert r.exit_code == 1
    assert one_error_line(r.output) == "error: forbidden_scope: this token may not do that"
    for token in (*world.tokens.values(), worker):
        assert token not in r.output


def test_unknown_token_and_missing_right_differ_on_swarm_commands(world: World, cli) -> None:  # type: ignore[no-untyped-def]
    unknown = one_error_line(cli("swarm", "swarm-a", "status", token="wrong-token").output)
    forbidden = one_error_line(cli("swarm", "swarm-a", "status", token=world.tokens[MASTER_B]).output)
    assert "did not accept the token" in unknown and "forbidden_scope" not in unknown
    assert forbidden.startswith("error: forbidden_scope") and "did not accept" not in forbidden


def test_a_swarm_named_list_is_still_reachable_and_list_takes_no_name(world: World, cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("swarm", "list", "status", token=world.tokens["operator"])
    assert r.exit_code == 1 and one_error_line(r.output) == "error: unknown swarm: list"
    r = cli("swarm", "swarm-a", "list", token=world.tokens["operator"])
    assert r.exit_code == 1 and "list takes no swarm name" in one_error_line(r.output)


def test_status_fits_120_columns_and_wide_shows_every_column(world: World, cli) -> None:  # type: ignore[no-untyped-def]
    eid = world.fail()
    built = world.checkpoint(eid)
    r = cli("swarm", "swarm-a", "status", token=world.tokens["operator"])
    assert r.exit_code == 0, r.output
    assert max(len(line) for line in r.output.splitlines()) <= WIDTH, r.output
    assert "awaiting decision" in r.output and "Resume native" in r.output
    assert " AT " not in r.output and "AWAITING" not in r.output
    wide = cli("swarm", "swarm-a", "status", "--wide", token=world.tokens["operator"])
    assert wide.exit_code == 0, wide.output
    header = next(line for line in wide.output.splitlines() if "BINDING" in line)
    assert header.split() == [
        "SEAT",
        "AT",
        "BINDING",
        "REASON",
        "CHECKPOINT",
        "RESUME",
        "CONTINUITY",
        "SUCCESSOR",
        "AWAITING",
    ]
    card = json.loads(cli("swarm", "swarm-a", "status", "--json", token=world.tokens["operator"]).output)
    full = card["handoffs"][0]
    assert full["reason"] in wide.output and built.checkpoint_id in wide.output
    assert "\u2026" not in wide.output
    # --json is unchanged by either: the card fields are all there
    for field in ("checkpoint", "resume_available", "resume_label", "continuity"):
        assert field in full


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completion_script_completes_the_commands(tmp_path: Path) -> None:
    """The script ``--show-completion`` prints, sourced in a real bash, completes verbs and options."""
    exe = BIN / "agentihooks"
    assert exe.exists(), "the console script is installed by `make install`"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(tmp_path)}
    script = subprocess.run(
        ["bash", "-c", "agentihooks --show-completion"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    ).stdout
    assert "complete" in script and "_AGENTIHOOKS_COMPLETE" in script
    (tmp_path / "completion.sh").write_text(script)

    def complete(*words: str) -> list[str]:
        probe = (
            f"source {tmp_path / 'completion.sh'}; COMP_WORDS=({' '.join(words)}); "
            "COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _agentihooks_completion agentihooks; "
            'printf "%s\\n" "${COMPREPLY[@]}"'
        )
        done = subprocess.run(
            ["bash", "-c", probe], capture_output=True, text=True, env=env, timeout=60, check=True
        )
        return done.stdout.split()

    assert "swarm" in complete("agentihooks", "sw")
    assert "--version" in complete("agentihooks", "--v")
    got = complete("agentihooks", "swarm", "example", "st")
    assert "status" in got
    assert "--output" in complete("agentihooks", "swarm", "example", "status", "--o")


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completes_swarm_and_seat_names_from_the_control_api(world: World, tmp_path: Path) -> None:
    """Names come from the API the command would call, as the token may see them; an API that
    cannot be reached offers nothing, and prints nothing."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(tmp_path)}
    script = subprocess.run(
        ["bash", "-c", "agentihooks --show-completion"], capture_output=True, text=True, env=env, check=True
    ).stdout
    (tmp_path / "completion.sh").write_text(script)

    def complete(token: str, *words: str, url: str = world.url) -> tuple[list[str], str]:
        probe = (
            f"source {tmp_path / 'completion.sh'}; COMP_WORDS=({' '.join(shlex.quote(w) for w in words)}); "
            "COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _agentihooks_completion agentihooks; "
            'printf "%s\\n" "${COMPREPLY[@]}"'
        )
        run_env = {**env, "AGENTIHOOKS_CONTROL_URL": url, "AGENTIHOOKS_TOKEN": token}
        done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, env=run_env, timeout=60)
        return done.stdout.split(), done.stderr

    op = world.tokens["operator"]
    assert complete(op, "agentihooks", "swarm", "swarm-")[0] == ["swarm-a", "swarm-b"]
    assert complete(world.tokens[MASTER_A], "agentihooks", "swarm", "swarm-")[0] == ["swarm-a"]
    seats = sorted(s.name for s in world.specs["swarm-a"].seats)
    for verb in ("restore-decision", "checkpoints", "relaunch"):
        got, _ = complete(op, "agentihooks", "swarm", "swarm-a", verb, "")
        assert got == seats, verb
    first = seats[0][:3]
    assert set(complete(op, "agentihooks", "swarm", "swarm-a", "checkpoints", first)[0]) <= set(seats)
    none, err = complete(op, "agentihooks", "swarm", "swarm-", url="http://127.0.0.1:9")
    assert none == [] and "Traceback" not in err and "error" not in err
    assert complete("never-issued", "agentihooks", "swarm", "swarm-")[0] == []
