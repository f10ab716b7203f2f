"""``--kubeconfig`` and ``--request-timeout``, as kubectl spells them (issue 47)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import typer
from agentihooks_operator.cli import main as cli_main
from agentihooks_operator.cli.reach import control_client
from typer.testing import CliRunner


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30", 30.0), ("30s", 30.0), ("2m", 120.0), ("1h", 3600.0), ("0", None), ("1.5", 1.5)],
)
def test_request_timeouts_read_as_kubectl_writes_them(text: str, seconds: float | None) -> None:
    assert cli_main._duration(text) == seconds


@pytest.mark.parametrize("text", ["-1", "ten", "5d", "nan", "", "999999"])
def test_a_request_timeout_that_is_no_duration_is_refused(text: str) -> None:
    with pytest.raises(typer.BadParameter, match="is not a duration"):
        cli_main._duration(text)


def _flat(text: str) -> str:
    """The error panel's words on one line (rich wraps them inside a box)."""
    return " ".join(text.replace("│", " ").split())


def test_the_options_reach_the_client_and_a_missing_kubeconfig_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    missing = runner.invoke(cli_main.app, ["--kubeconfig", str(tmp_path / "nope"), "swarm", "list"])
    said = _flat(missing.output)
    assert missing.exit_code == 2 and "--kubeconfig" in said and "not a readable file" in said, said
    bad = runner.invoke(cli_main.app, ["--request-timeout", "soon", "swarm", "list"])
    assert bad.exit_code == 2 and "--request-timeout" in _flat(bad.output)
    config = tmp_path / "kubeconfig"
    config.write_text("apiVersion: v1\nkind: Config\ncontexts: []\n")
    monkeypatch.setenv("KUBECONFIG", "/elsewhere")
    seen: dict[str, object] = {}

    @cli_main.app.command("probe-options", hidden=True)
    def probe(ctx: typer.Context) -> None:
        seen["kubeconfig"] = os.environ.get("KUBECONFIG")
        obj = ctx.find_object(dict) or {}
        client = control_client({**obj, "url": "http://127.0.0.1:9", "token": "t"})
        seen["timeout"] = client.http.timeout.read

    try:
        args = ["--kubeconfig", str(config), "--request-timeout", "2m", "probe-options"]
        result = runner.invoke(cli_main.app, args)
        assert result.exit_code == 0, result.output
    finally:
        cli_main.app.registered_commands[:] = [
            c for c in cli_main.app.registered_commands if c.name != "probe-options"
        ]
    assert seen == {"kubeconfig": str(config), "timeout": 120.0}
