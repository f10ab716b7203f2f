"""``agentihooks swarm NAME ...`` end to end: what it prints, its exit codes, and that errors are one line."""

from __future__ import annotations

import json
import logging

import pytest
from testsupport.control_api import MASTER_A, MASTER_B, World

NO_CHECKPOINT = "no complete compatible checkpoint to resume from"
NOT_PENDING = "no recovery decision is pending for this attempt"


def one_error_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert "Traceback" not in output
    assert lines[0].startswith("error: ")
    return lines[0]


def test_restore_decision_records_the_request_and_says_so(world: World, cli) -> None:  # type: ignore[no-untyped-def]
    eid = world.fail()
    world.checkpoint(eid)
    r = cli("swarm", "swarm-a", "restore-decision", "eng-1", "resume", token=world.tokens[MASTER_A])
    assert r.exit_code == 0, r.output
    assert f"recorded: resume for seat eng-1 (execution {eid})" in r.output
    assert "next recovery pass" in r.output
    assert world.recoveries["swarm-a"].awaiting_execution("eng-1") == eid  # only recorded
    report = world.recoveries["swarm-a"].reconcile(world.specs["swarm-a"], [])
    assert report.decisions[0].mode == "resume" and report.decisions[0].decided_by == MASTER_A
    again = cli("swarm", "swarm-a", "restore-decision", "eng-1", "resume", token=world.tokens[MASTER_A])
    assert again.exit_code == 0 and "already accepted: resume" in again.output
    assert report.decisions[0].replacement in again.output


def test_refusals_exit_non_zero_with_the_reason(world: World, cli) -> None:  # type: ignore[no-untyped-def]
    world.fail()
    r = cli("swarm", "swarm-a", "restore-decision", "eng-1", "resume", token=world.tokens["operator"])
    assert r.exit_code == 1
    assert one_error_line(r.output) == f"error: {NO_CHECKPOINT}"
    cli("swarm", "swarm-a", "restore-decision", "eng-1", "fresh", token=world.tokens["operator"])
    world.recoveries["swarm-a"].reconcile(world.specs["swarm-a"], [])
    r = cli("swarm", "swarm-a", "restore-decision", "eng-1", "resume", token=world.tokens["operator"])
    assert r.exit_code == 1 and one_error_line(r.output) == f"error: {NOT_PENDING}"


def test_restore_decision_now_applies_at_once(world: World, cli) -> None:  # type: ignore[no-untyped-def]
    eid = world.fail()
    r = cli(
        "swarm",
        "swarm-a",
        "restore-decision",
        "eng-1",
        "fresh",
        "--now",
        "--agent",
        MASTER_A,
        token=world.tokens[MASTER_A],
    )
    assert r.exit_code == 0, r.output
    assert "accepted: fresh for seat eng-1 -> replacement exe-" in r.output
    assert world.recoveries["swarm-a"].awaiting_execution("eng-1") is None
    assert eid not in r.output or "replacement" in r.output


def test_status_table_and_json(world: World, cli) -> None:  # type: ignore[no-untyped-def]
    eid = world.fail()
    built = world.checkpoint(eid)
    table = cli("swarm", "swarm-a", "status", token=world.tokens["operator"])
    assert table.exit_code == 0, table.output
    assert "awaiting decision" in table.output and "Resume native" in table.output
    assert built.checkpoint_id in table.output and "paused: yes" in table.output
    r = cli("swarm", "swarm-a", "status", "--json", token=world.tokens["operator"])
    body = json.loads(r.output)
    card = body["handoffs"][0]
    assert card["checkpoint"] == built.checkpoint_id and card["resume_available"] is True
    assert card["resume_label"] == "Resume native" and card["continuity"] == "pending"


def test_pause_and_unpause(world: World, cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("swarm", "swarm-b", "pause", token=world.tokens["operator"])
    assert r.exit_code == 0 and "restore automation paused" in r.output
    assert world.recoveries["swarm-b"].paused()
    r = cli("swarm", "swarm-b", "unpause", token=world.tokens["operator"])
    assert r.exit_code == 0 and "not paused" in r.output
    r = cli("swarm", "swarm-b", "pause", token=world.tokens[MASTER_B])
    assert r.exit_code == 1 and "forbidden_scope" in one_error_line(r.output)
    assert not world.recoveries["swarm-b"].paused()


def test_checkpoints_and_events(world: World, cli) -> None:  # type: ignore[no-untyped-def]
    eid = world.fail()
    built = world.checkpoint(eid)
    r = cli("swarm", "swarm-a", "checkpoints", "eng-1", token=world.tokens[MASTER_A])
    assert r.exit_code == 0 and built.checkpoint_id in r.output and "native" in r.output
    r = cli("swarm", "swarm-a", "events", token=world.tokens[MASTER_A])
    assert r.exit_code == 0 and "fence" in r.output and eid in r.output
    r = cli("swarm", "swarm-a", "events", "--follow", "--limit", "1", "--json", token=world.tokens[MASTER_A])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output.splitlines()[0])["execution_id"]


def test_errors_are_one_clear_line(world: World, cli) -> None:  # type: ignore[no-untyped-def]
    cases = [
        (("swarm", "swarm-a", "status"), {"token": "wrong-token"}, "did not accept the token"),
        (("swarm", "swarm-a", "status"), {"token": world.tokens[MASTER_B]}, "forbidden_scope"),
        (("swarm", "swarm-a", "status"), {"token": ""}, "did not accept the token"),
        (("swarm", "nope", "status"), {"token": world.tokens["operator"]}, "unknown swarm: nope"),
        (
            ("swarm", "swarm-a", "checkpoints", "eng-9"),
            {"token": world.tokens["operator"]},
            "unknown seat: eng-9",
        ),
        (
            ("swarm", "swarm-a", "restore-decision", "eng-9", "fresh"),
            {"token": world.tokens["operator"]},
            "unknown seat: eng-9",
        ),
        (("swarm", "swarm-a", "checkpoints", "../x"), {"token": world.tokens["operator"]}, "not a seat name"),
        (
            ("swarm", "swarm-a", "status"),
            {"token": world.tokens["operator"], "url": "http://127.0.0.1:1"},
            "cannot reach the controller",
        ),
        (("swarm", "swarm-a", "status"), {"url": "ftp://x"}, "must start with http"),
    ]
    for args, kw, expected in cases:
        r = cli(*args, **kw)
        assert r.exit_code != 0, (args, r.output)
        line = one_error_line(r.output)
        assert expected in line, (args, line)
        for token in world.tokens.values():
            assert token not in r.output


def test_restore_decision_now_while_the_card_reads_recovering_is_refused_by_the_controller(
    world: World, cli, caplog: pytest.LogCaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    args = ("swarm", "swarm-a", "restore-decision", "eng-1", "fresh", "--now")
    caplog.set_level(logging.INFO)
    running = world.first["swarm-a"].execution_id
    r = cli(*args, token=world.tokens["operator"])  # nothing failed: still the controller refuses
    assert (
        r.exit_code == 1
        and one_error_line(r.output) == "error: no recovery decision is pending for this attempt"
    )
    assert any(
        f"the recovery request for {running} was refused: no recovery decision is pending" in rec.getMessage()
        for rec in caplog.records
    )
    caplog.clear()
    recovery, _ = world.fail_before_decide()
    r = cli(*args, token=world.tokens["operator"])
    assert r.exit_code == 1
    refused = [rec.getMessage() for rec in caplog.records if "refused" in rec.getMessage()]
    assert refused, "the controller logged no refusal line"
    assert set(world.launcher.pods) <= {p.execution_id for p in world.first.values()}  # nothing admitted
    assert one_error_line(r.output) == (
        "error: seat eng-1 is still recovering: its failed attempt is being released and no decision "
        "can be taken yet; read status again shortly"
    )
    recovery.reconcile(world.specs["swarm-a"], [])
    r = cli(*args, token=world.tokens["operator"])
    assert r.exit_code == 0, r.output
    assert "accepted: fresh for seat eng-1 -> replacement exe-" in r.output


def test_an_unknown_swarm_names_the_namespace_asked_and_why(world: World, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """kubectl's wrong-context trap: the Swarm exists, in another namespace than the one the context
    chose; the error says which namespace was asked and where that came from."""
    from agentihooks_operator.cli.main import app
    from typer.testing import CliRunner

    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: staging\n"
        "contexts:\n- name: staging\n  context: {cluster: c, user: u, namespace: elsewhere}\n"
    )
    env = {"AGENTIHOOKS_CONTROL_URL": world.url, "AGENTIHOOKS_TOKEN": world.tokens["operator"]}
    runner = CliRunner()
    r = runner.invoke(app, ["swarm", "swarm-a", "status"], env={**env, "KUBECONFIG": str(config)})
    assert r.exit_code == 1
    assert one_error_line(r.output) == (
        "error: unknown swarm: swarm-a in namespace elsewhere (from the kubeconfig context 'staging')"
    )
    r = runner.invoke(
        app, ["swarm", "swarm-a", "-n", "team-x", "status"], env={**env, "KUBECONFIG": str(config)}
    )
    assert one_error_line(r.output) == "error: unknown swarm: swarm-a in namespace team-x (from -n)"
    r = runner.invoke(app, ["swarm", "swarm-a", "status"], env={**env, "AGENTIHOOKS_NAMESPACE": "team-y"})
    assert one_error_line(r.output).endswith("in namespace team-y (from $AGENTIHOOKS_NAMESPACE)")
    ok = runner.invoke(
        app, ["swarm", "swarm-a", "-n", "default", "status"], env={**env, "KUBECONFIG": str(config)}
    )
    assert ok.exit_code == 0, ok.output


def test_confirm_stopped_ends_a_lease_wait_and_says_so(world: World, cli) -> None:  # type: ignore[no-untyped-def]
    r, spec = world.recoveries["swarm-a"], world.specs["swarm-a"]
    eid = world.first["swarm-a"].execution_id
    from testsupport.recovery import observe

    ok = world.call("POST", f"/v1/executions/{eid}/lease", world.worker_token(eid), json={})
    assert ok.status_code == 200
    r.reconcile(spec, observe([(eid, "eng-1", 1)], failed={eid: "node_lost"}))  # renewed just now: it waits
    new = r.decide(eid, "fresh", "operator", spec=spec).replacement
    assert new is not None and new not in world.launcher.pods
    master = cli("swarm", "swarm-a", "confirm-stopped", "eng-1", token=world.tokens[MASTER_A])
    assert master.exit_code == 1 and one_error_line(master.output).startswith("error: ")
    said = cli("swarm", "swarm-a", "confirm-stopped", "eng-1", token=world.tokens["operator"])
    assert said.exit_code == 0, said.output
    assert f"confirmed: seat eng-1: {eid} has stopped; its replacement no longer waits" in said.output
    again = cli(
        "swarm", "swarm-a", "confirm-stopped", "eng-1", "--execution", eid, token=world.tokens["operator"]
    )
    assert again.exit_code == 0 and "already confirmed" in again.output
    r.reconcile(spec, observe([(new, "eng-1", 2)]))
    assert new in world.launcher.pods
    # a proven death: nothing waits, nothing to confirm
    ok = world.call("POST", f"/v1/executions/{new}/lease", world.worker_token(new), json={})
    assert ok.status_code == 200
    r.reconcile(spec, observe([(new, "eng-1", 2)], failed={new: "oom_killed"}))
    proven = cli("swarm", "swarm-a", "confirm-stopped", "eng-1", token=world.tokens["operator"])
    assert proven.exit_code == 1 and "nothing waits for this attempt" in one_error_line(proven.output)
