"""Fix the cause and relaunch: a version-changed refusal, fixed by changing the Swarm's image.

The controller (real aiohttp control API, real Redis, real local store) resumes
a seat natively from its checkpoint. The replacement is a real
``agentihooks-worker boot`` process whose image carries another Claude Code
2.1 than the one that wrote the session: it refuses ``version_changed``,
reports the refusal to the controller and exits 64. The exit is not fenced,
the decision stays accepted and nothing new is decided or launched; the card
(status over the API, and the real CLI's status) says ``restore refused:
version_changed`` with the hint to change the image. The operator sets the
Swarm's image to one with the captured version and runs ``agentihooks swarm
NAME relaunch SEAT``: the same directive is launched as the next generation,
and its worker (a real process again) restores natively from the original
checkpoint of the original fenced attempt; the controller stores that outcome
as verified. Relaunching again changes nothing.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from agentihooks_operator.cli.main import app
from agentihooks_operator.recovery import LaunchPlan
from agentihooks_operator.swarm import SwarmSpec
from testsupport.control_api import MASTER_A, World, make_world
from testsupport.recovery import observe
from testsupport.scrape import scrape, value
from testsupport.worker_boot import start_boot
from typer.testing import CliRunner

from .conftest import events, harness_runs

PROJECT = "github.com/example/app"
CAPTURED = "2.1.332"
CHANGED = "2.1.400"


def start_worker(
    w: World, plan: LaunchPlan, folder: Path, worktree: Path, version: str
) -> subprocess.Popen[str]:
    """The worker Pod of ``plan``: its launch record, credential and image's harness version."""
    assert plan.directive is not None and plan.restore_from is not None
    return start_boot(
        plan,
        folder,
        control_url=w.url,
        project=PROJECT,
        worktree=worktree,
        FAKE_CLAUDE_VERSION=f"{version} (Claude Code)",
    )


def cli(w: World, *args: str, token: str | None = None) -> Any:
    env = {"AGENTIHOOKS_CONTROL_URL": w.url, "AGENTIHOOKS_TOKEN": token or w.tokens["operator"]}
    return CliRunner().invoke(app, list(args), env=env)


def card(w: World) -> dict[str, Any]:
    r = w.call("GET", "/v1/swarms/swarm-a/status", w.tokens["operator"])
    assert r.status_code == 200, r.text
    [found] = r.json()["handoffs"]
    return dict(found)


def test_a_version_changed_refusal_is_fixed_by_a_new_image_and_relaunched(
    redis_url: str, tmp_path: Path
) -> None:
    (tmp_path / "world").mkdir()
    with make_world(redis_url, tmp_path / "world") as w:
        r, spec = w.recoveries["swarm-a"], w.specs["swarm-a"]
        first = w.first["swarm-a"].execution_id  # it held sess-1 and archived up to record 5
        built = w.checkpoint(first, kind="claude", harness_version=CAPTURED, project_id=PROJECT)
        report = r.reconcile(spec, observe([(first, "eng-1", 1)], failed={first: "oom_killed"}))
        [decision] = report.decisions
        assert decision.decided_by == "automation" and decision.directive is not None
        assert decision.directive.recovery.value == "native"
        refused_plan = w.launcher.pods[decision.replacement]  # type: ignore[index]

        # The replacement's image has another Claude Code: it refuses, reports, and exits 64.
        worker = start_worker(w, refused_plan, tmp_path / "gen-2", built.worktree, CHANGED)
        _, err = worker.communicate(timeout=240)
        assert worker.returncode == 64, err
        [refusal] = events(err, "restore_refused")
        assert refusal["reason"] == "version_changed"
        assert events(err, "refusal_reported") != []
        assert harness_runs(tmp_path / "gen-2") == []

        # The pass sees the Pod exit (application_exit): nothing is fenced, decided or launched.
        obs = observe(
            [(refused_plan.execution_id, "eng-1", 2)], failed={refused_plan.execution_id: "application_exit"}
        )
        for _ in range(2):
            again = r.reconcile(spec, obs)
            assert again.fenced == [] and again.decisions == [] and again.launches == []
        assert w.client.hget(r.keys.attempt_fences, refused_plan.execution_id) is None
        shown = card(w)
        assert shown["binding"] == "bound" and shown["successor"] == refused_plan.execution_id
        assert shown["continuity"] == "pending" and shown["reason"].endswith(
            "restore refused: version_changed"
        )
        assert shown["restore_refused"]["reason"] == "version_changed"
        assert "image" in shown["restore_refused"]["hint"]
        status = cli(w, "swarm", "swarm-a", "status")
        assert status.exit_code == 0, status.output
        assert "restore refused (version_changed)" in status.output and "relaunch eng-1" in status.output
        # Choosing again returns the same decision and admits nothing.
        same = cli(w, "swarm", "swarm-a", "restore-decision", "eng-1", "resume", token=w.tokens[MASTER_A])
        assert same.exit_code == 0 and "already accepted" in same.output
        launched = set(w.launcher.created)  # both swarms' first attempts and this replacement
        assert refused_plan.execution_id in launched and len(launched) == 3

        # The operator fixes the cause: the Swarm's image now carries the captured version.
        doc = spec.model_dump(mode="json", by_alias=True)
        doc["image"] = "registry.example/worker:v2"
        fixed = SwarmSpec.model_validate(doc)
        w.registry.publish("swarm-a", r, fixed, holder="ctl-a")
        relaunched = cli(w, "swarm", "swarm-a", "relaunch", "eng-1")
        assert relaunched.exit_code == 0, relaunched.output
        assert relaunched.output.startswith("relaunched: seat eng-1:")
        new = w.client.hget(r.keys.seats, "eng-1").decode()
        plan = w.launcher.pods[new]
        assert plan.generation == 3 and plan.directive == decision.directive
        assert plan.restore_from is not None and plan.restore_from.execution_id == first
        assert plan.compatibility_key == fixed.compatibility_key != spec.compatibility_key
        assert refused_plan.execution_id not in w.launcher.pods  # the refused Pod was removed

        worker = start_worker(w, plan, tmp_path / "gen-3", built.worktree, CAPTURED)
        _, err = worker.communicate(timeout=240)
        assert worker.returncode == 0, err
        [verified] = events(err, "restore_verified")
        assert verified["recovery"] == "native" and verified["checkpoint_id"] == built.checkpoint_id
        [run] = harness_runs(tmp_path / "gen-3")
        assert run["argv"][-2:] == ["--resume", built.session_id]
        stored = json.loads(w.client.hget(r.keys.restore_outcomes, new))
        assert stored["status"] == "verified" and stored["recovery"] == "native"
        assert stored["restored_from"] == first and stored["watermark"] == built.watermark
        shown = card(w)
        assert shown["successor"] == new and shown["continuity"] == "native"
        assert shown["restore_refused"] is None and shown["relaunches"] == 1
        # the swarm-global counters say the same on /metrics (the refusal by reason, one relaunch)
        samples = scrape(w.url)
        refusals = "agentihooks_restore_refusals_total"
        assert value(samples, refusals, swarm="swarm-a", reason="version_changed") == 1
        assert value(samples, refusals, swarm="swarm-a", reason="corrupt_object") == 0  # exported at 0
        assert value(samples, "agentihooks_relaunches_total", swarm="swarm-a") == 1

        # Relaunching again answers the same relaunch and admits nothing.
        again = cli(w, "swarm", "swarm-a", "relaunch", "eng-1")
        assert again.exit_code == 0 and again.output.startswith("already relaunched:"), again.output
        assert w.launcher.created[new] == 1 and set(w.launcher.created) == launched | {new}


def test_relaunch_fresh_ends_in_a_verified_fresh_outcome(redis_url: str, tmp_path: Path) -> None:
    """A checkpoint that cannot be used (the image's Claude Code changed and stays changed): the
    operator relaunches the seat fresh from the CLI. That is recorded as a fresh decision by the
    operator, and the real worker's fresh outcome is accepted (it used to be refused as
    ``not_replacement``: the worker exited and its Pod was fenced as a new failure)."""
    (tmp_path / "world").mkdir()
    with make_world(redis_url, tmp_path / "world") as w:
        r, spec = w.recoveries["swarm-a"], w.specs["swarm-a"]
        first = w.first["swarm-a"].execution_id
        built = w.checkpoint(first, kind="claude", harness_version=CAPTURED, project_id=PROJECT)
        [decision] = r.reconcile(spec, observe([(first, "eng-1", 1)], failed={first: "oom_killed"})).decisions
        refused_plan = w.launcher.pods[decision.replacement]  # type: ignore[index]
        worker = start_worker(w, refused_plan, tmp_path / "gen-2", built.worktree, CHANGED)
        _, err = worker.communicate(timeout=240)
        assert worker.returncode == 64 and events(err, "refusal_reported") != [], err

        relaunched = cli(w, "swarm", "swarm-a", "relaunch", "eng-1", "--fresh")
        assert relaunched.exit_code == 0, relaunched.output
        new = w.client.hget(r.keys.seats, "eng-1").decode()
        plan = w.launcher.pods[new]
        assert plan.directive is not None and plan.directive.recovery.value == "fresh"
        stored_decision = json.loads(w.client.hget(r.keys.attempt_recoveries, first))
        assert (stored_decision["mode"], stored_decision["decided_by"]) == ("fresh", "operator")

        worker = start_worker(w, plan, tmp_path / "gen-3", built.worktree, CHANGED)
        _, err = worker.communicate(timeout=240)
        assert worker.returncode == 0, err[-3000:]
        [verified] = events(err, "restore_verified")
        assert verified["recovery"] == "fresh" and verified["checkpoint_id"] is None
        [run] = harness_runs(tmp_path / "gen-3")
        assert "--resume" not in run["argv"]
        stored = json.loads(w.client.hget(r.keys.restore_outcomes, new))
        assert stored["status"] == "verified" and stored["recovery"] == "fresh"
        # the pass sees its Pod end normally later: nothing about it is fenced or decided again
        assert w.client.hget(r.keys.attempt_fences, new) is None
        shown = card(w)
        assert shown["successor"] == new and shown["continuity"] == "fresh" and shown["relaunches"] == 1
