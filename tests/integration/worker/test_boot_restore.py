"""Boot end to end with the fake harness: native (Claude Code, Codex), reconstructed and fresh restores."""

from __future__ import annotations

import json
import stat

import pytest
from agentihooks_checkpoint.validator import Validator
from agentihooks_worker.continuation import OPENING_LINE
from agentihooks_worker.harness.claude import encode_cwd
from testsupport.checkpoints import SEPARATORS_TEXT, run_git

from .conftest import NEW_EXECUTION, SCOPE, ScenarioFactory, events, harness_runs


def assert_source_restored(worktree, built) -> None:  # type: ignore[no-untyped-def]
    assert run_git(worktree, "rev-parse", "HEAD") == built.head_commit
    assert run_git(worktree, "symbolic-ref", "--short", "HEAD") == built.record.branch_name
    assert (worktree / "README.md").read_text() == "fixture project\nuncommitted edit\n"
    assert (worktree / "data.bin").read_bytes() == bytes(range(255, -1, -1))
    assert (worktree / "notes" / "untracked.md").read_text() == "untracked note\n"
    assert not (worktree / "ignored.log").exists()


@pytest.mark.parametrize("s3", [False, True], ids=["local", "s3"])
def test_native_claude_restore(
    scenario: ScenarioFactory, capsys: pytest.CaptureFixture[str], s3: bool
) -> None:
    sc = scenario("claude", "native", s3=s3)
    boot = sc.boot()
    ctx = boot.prepare()
    layout, built = sc.layout, sc.built
    restored = (
        layout.claude_config_dir / "projects" / encode_cwd(layout.worktree) / f"{built.session_id}.jsonl"
    )
    assert restored.read_bytes() == built.transcript.read_bytes()  # raw U+2028/U+2029 byte for byte
    assert SEPARATORS_TEXT.encode() in restored.read_bytes()
    assert stat.S_IMODE(restored.stat().st_mode) == 0o600
    assert_source_restored(layout.worktree, built)
    onboarding = json.loads((layout.claude_config_dir / ".claude.json").read_text())
    assert onboarding["hasCompletedOnboarding"] is True
    assert onboarding["projects"][str(layout.worktree)]["hasTrustDialogAccepted"] is True
    assert ctx.restored.argv == [sc.launch["agent"][0], "-p", "--resume", built.session_id]
    err = capsys.readouterr().err
    assert events(err, "restore_verified") == [
        {
            "event": "restore_verified",
            "execution_id": NEW_EXECUTION,
            "recovery": "native",
            "checkpoint_id": "ckpt-7",
            "watermark": built.watermark,
        }
    ]
    assert "middle" not in err and "message 0" not in err  # no conversation content in the log
    # the first capture is the new attempt's own, under its own generation, and it verifies
    mine = sc.store.list_checkpoints(SCOPE, execution_id=NEW_EXECUTION)
    assert len(mine) == 1 and mine[0].native and mine[0].native_session_id == built.session_id
    assert mine[0].execution_generation == 2 and mine[0].checkpoint_sequence == 8
    verdict = Validator().verify(
        sc.store, SCOPE, mine[0].checkpoint_id, execution_id=NEW_EXECUTION, execution_generation=2
    )
    assert verdict.ok
    assert boot.restorer.metrics.snapshot() == {"restore_outcomes_by_type": {"native": 1}}
    assert 'type="native"} 1' in (layout.root / "run" / "metrics.prom").read_text()
    # the supervisor resumes the same conversation natively
    assert boot.supervise(ctx) == 0
    runs = harness_runs(sc.tmp)
    assert runs[-1]["argv"] == ["-p", "--resume", built.session_id]
    assert runs[-1]["cwd"] == str(layout.worktree) and runs[-1]["session"] == built.session_id
    assert restored.read_bytes().startswith(built.transcript.read_bytes())
    final = sc.store.list_checkpoints(SCOPE, execution_id=NEW_EXECUTION)
    assert len(final) == 2 and final[0].watermark == built.watermark + 1


def test_native_codex_restore(scenario: ScenarioFactory) -> None:
    sc = scenario("codex", "native")
    boot = sc.boot()
    ctx = boot.prepare()
    layout, built = sc.layout, sc.built
    rel = built.native_files[0].removeprefix(".codex/")
    assert (layout.codex_home / rel).read_bytes() == built.transcript.read_bytes()
    assert not list(layout.codex_home.glob("*.sqlite"))
    assert_source_restored(layout.worktree, built)
    assert ctx.restored.argv == [sc.launch["agent"][0], "exec", "resume", built.session_id]
    assert boot.supervise(ctx) == 0
    run = harness_runs(sc.tmp)[-1]
    assert run["argv"] == ["exec", "resume", built.session_id] and run["session"] == built.session_id


@pytest.mark.parametrize("kind", ["context", "claude"])
def test_reconstructed_restore(
    scenario: ScenarioFactory, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    sc = scenario(kind, "reconstructed")  # type: ignore[arg-type]
    boot = sc.boot()
    ctx = boot.prepare()
    layout, built = sc.layout, sc.built
    cont = layout.continuation
    assert stat.S_IMODE(cont.stat().st_mode) == 0o600
    assert cont.read_bytes() == OPENING_LINE.encode() + b"\n\n" + built.transcript.read_bytes()
    assert not list(layout.claude_config_dir.glob("projects/*/*.jsonl"))  # no native state for a new session
    assert_source_restored(layout.worktree, built)
    assert ctx.restored.argv == sc.launch["agent"][:-1]  # the original command without its prompt
    assert ctx.restored.stdin == cont  # the continuation is the whole opening input
    err = capsys.readouterr().err
    assert [e["recovery"] for e in events(err, "restore_verified")] == ["reconstructed"]
    assert "middle" not in err
    assert boot.supervise(ctx) == 0
    run = harness_runs(sc.tmp)[-1]
    assert run["stdin_bytes"] == cont.stat().st_size and run["session"] != built.session_id
    assert run["argv"] == ["-p"]
    assert boot.restorer.metrics.snapshot() == {"restore_outcomes_by_type": {"reconstructed": 1}}


def test_fresh_launch_needs_no_store(scenario: ScenarioFactory, capsys: pytest.CaptureFixture[str]) -> None:
    sc = scenario("claude", "fresh")
    sc.settings = sc.settings.model_copy(update={"checkpoint_root": None})
    boot = sc.boot()
    ctx = boot.prepare()
    assert ctx.store is None and ctx.restored.argv == sc.launch["agent"]
    assert run_git(sc.layout.worktree, "rev-parse", "HEAD") == sc.built.head_commit  # cloned checkout
    assert [e["recovery"] for e in events(capsys.readouterr().err, "restore_verified")] == ["fresh"]
    assert boot.supervise(ctx) == 0
    assert harness_runs(sc.tmp)[-1]["argv"] == ["-p", "carry on"]
    assert boot.restorer.metrics.snapshot() == {"restore_outcomes_by_type": {"fresh": 1}}


def test_clone_when_the_worktree_has_no_repository(scenario: ScenarioFactory) -> None:
    sc = scenario("claude", "native")
    ctx = sc.boot().prepare()
    assert (ctx.layout.worktree / ".git").is_dir()
    assert_source_restored(ctx.layout.worktree, sc.built)


def test_existing_repository_at_base_is_used(scenario: ScenarioFactory) -> None:
    sc = scenario("claude", "native")
    wt = sc.layout.worktree
    wt.parent.mkdir(parents=True)
    run_git(wt.parent, "clone", "-q", str(sc.built.worktree), wt.name)
    run_git(wt, "checkout", "-q", sc.built.base_commit)
    sc.settings = sc.settings.model_copy(update={"project_remotes": {}})
    ctx = sc.boot().prepare()
    assert_source_restored(ctx.layout.worktree, sc.built)


def test_first_launch_without_a_directive_restores_nothing(
    scenario: ScenarioFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    sc = scenario("claude", "fresh")
    del sc.launch["restore"], sc.launch["restore_from"]
    boot = sc.boot()
    ctx = boot.prepare()
    assert ctx.restored.argv == sc.launch["agent"] and ctx.restored.record is None
    assert events(capsys.readouterr().err, "restore_verified") == []
    assert boot.restorer.metrics.snapshot() == {"restore_outcomes_by_type": {}}
    assert boot.supervise(ctx) == 0
    # the attempt captures its own work as it goes, under its own generation
    mine = sc.store.list_checkpoints(SCOPE, execution_id=NEW_EXECUTION)
    assert len(mine) == 1 and mine[0].execution_generation == 2


def test_periodic_capture_of_an_unchanged_attempt_is_skipped(scenario: ScenarioFactory) -> None:
    sc = scenario("claude", "native")
    boot = sc.boot()
    ctx = boot.prepare()
    hook = boot.capture_hook
    assert hook is not None and len(hook.taken) == 1  # the first capture
    assert hook("periodic") is None  # nothing changed since
    transcript = ctx.restored.transcript
    assert transcript is not None
    with transcript.open("ab") as f:
        f.write(b'{"type": "assistant", "message": "more"}\n')
    result = hook("periodic")
    assert result is not None and result.watermark == sc.built.watermark + 1
    assert hook("periodic") is None
    (ctx.layout.worktree / "README.md").write_text("changed again\n")
    assert hook("periodic") is not None
    assert hook("final") is not None  # a final capture is always taken
    assert len(sc.store.list_checkpoints(SCOPE, execution_id=NEW_EXECUTION)) == 4
