"""Continuous capture's pieces: the triggers coalesce events, the hooks merge, the policy resolves.

The clock is a variable here, so each rule is shown at the exact moment it
applies; the worker-level tests (tests/integration/worker/test_continuous_capture.py)
run the same code with a real harness process.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import tomllib
from pathlib import Path

import pytest
from agentihooks_checkpoint.launch import CapturePolicy, LaunchRecord
from agentihooks_worker.capture_policy import policy_of
from agentihooks_worker.harness import harness_for
from agentihooks_worker.hooks import (
    HOOK_COMMAND,
    SIGNAL_ENV,
    HookSettingsError,
    add_capture_hooks,
    codex_notify_override,
)
from agentihooks_worker.settings import WorkerSettings
from agentihooks_worker.triggers import SIGNAL_TRUNCATE_AT, CaptureTriggers


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def triggers(clock: Clock, **kw: object) -> CaptureTriggers:
    return CaptureTriggers(floor=1.0, interval=300.0, clock=clock, **kw)  # type: ignore[arg-type]


def test_an_event_is_captured_once_the_floor_has_passed() -> None:
    clock = Clock()
    t = triggers(clock)
    assert t.due() is None
    clock.now += 0.5
    t.poke()
    assert t.due() is None  # within the floor of the start
    clock.now += 0.5
    assert t.due() == "event"
    t.taken()
    assert t.due() is None  # nothing new since


def test_a_burst_of_events_is_one_capture_per_floor() -> None:
    clock = Clock()
    t = triggers(clock)
    captures = 0
    for _ in range(3000):  # a hook firing 1,000 times a second for 3 s
        clock.now += 0.001
        t.poke()
        if t.due() is not None:
            captures += 1
            t.taken()
    assert t.events == 3000
    assert captures == 3  # one a second


def test_an_event_during_a_capture_is_kept_for_the_next() -> None:
    clock = Clock()
    t = triggers(clock)
    clock.now += 2
    t.poke()
    assert t.due() == "event"
    t.taken()
    t.poke()  # arrived after the capture started: not covered by it
    clock.now += 1
    assert t.due() == "event"


def test_an_expensive_capture_raises_the_floor() -> None:
    """A capture that took 0.5 s: the next event capture waits 20 x 0.5 s, not the 1 s floor."""
    clock = Clock()
    t = triggers(clock)
    clock.now += 1
    t.poke()
    assert t.due() == "event"
    t.taken(cost=0.5)
    t.poke()
    clock.now += 9.9
    assert t.due() is None
    clock.now += 0.1
    assert t.due() == "event"
    t.taken(cost=0.01)  # cheap again: back to the floor
    t.poke()
    clock.now += 1
    assert t.due() == "event"


def test_the_periodic_capture_remains_the_fallback() -> None:
    clock = Clock()
    t = triggers(clock)
    clock.now += 299
    assert t.due() is None
    clock.now += 1
    assert t.due() == "periodic"
    t.taken()
    clock.now += 299.9
    assert t.due() is None


def test_periodic_mode_ignores_events_it_would_see(tmp_path: Path) -> None:
    clock = Clock()
    signal = tmp_path / "signal"
    signal.touch()
    t = CaptureTriggers(floor=300, interval=300, continuous=False, signal_file=signal, clock=clock)
    signal.write_text(".")
    clock.now += 10
    assert t.due() is None


def test_the_signal_file_growing_is_an_event_and_it_is_emptied_when_large(tmp_path: Path) -> None:
    clock = Clock()
    signal = tmp_path / "signal"
    signal.touch()
    t = triggers(clock, signal_file=signal)
    clock.now += 5
    assert t.due() is None
    with signal.open("a") as f:
        f.write(".")
    assert t.due() == "event"
    t.taken()
    signal.write_text("." * SIGNAL_TRUNCATE_AT)
    clock.now += 5
    assert t.due() == "event"
    assert signal.stat().st_size == 0  # emptied; the next byte is the next event
    t.taken()
    clock.now += 5
    assert t.due() is None
    with signal.open("a") as f:
        f.write(".")
    assert t.due() == "event"


def test_a_changed_session_file_is_an_event_read_every_floor() -> None:
    clock = Clock()
    seen = {"sig": ("a", 1)}
    looks = []

    def watch() -> object:
        looks.append(clock.now)
        return seen["sig"]

    t = triggers(clock, watch=watch)
    clock.now += 1
    assert t.due() == "event"  # first look: a session this worker never captured
    t.taken()
    clock.now += 1
    assert t.due() is None  # looked again: unchanged
    seen["sig"] = ("a", 2)
    clock.now += 0.5
    assert t.due() is None  # not looked at again before the floor
    clock.now += 0.5
    assert t.due() == "event"
    assert len(looks) == 3


def test_a_session_written_before_the_first_look_is_an_event() -> None:
    """A fresh attempt's harness may write its whole first turn before the first look, then wait on a
    long reply: the session never changes again. On the real node such a Claude Code had no checkpoint
    for 5 minutes, the first look having been taken as the starting point."""
    clock = Clock()
    t = triggers(clock, watch=lambda: ("s.jsonl", 4096))
    clock.now += 1
    assert t.due() == "event"
    t.taken()
    clock.now += 5
    assert t.due() is None  # unchanged since: nothing more


def test_a_session_that_appears_after_the_first_look_is_an_event() -> None:
    clock = Clock()
    seen: dict[str, object] = {"sig": None}
    t = triggers(clock, watch=lambda: seen["sig"])
    clock.now += 1
    assert t.due() is None  # first look: no session yet
    seen["sig"] = ("s.jsonl", 4096)
    clock.now += 1
    assert t.due() == "event"


def test_a_watch_that_fails_is_looked_at_again() -> None:
    clock = Clock()
    calls = []

    def watch() -> object:
        calls.append(1)
        raise FileNotFoundError("replaced meanwhile")

    t = triggers(clock, watch=watch)
    clock.now += 1
    assert t.due() is None
    clock.now += 1
    assert t.due() is None
    assert len(calls) == 2


# -- the hooks -----------------------------------------------------------------------------------
def test_hooks_are_merged_into_existing_settings_once(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(
        json.dumps({"model": "x", "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "mine"}]}]}})
    )
    settings.chmod(0o640)
    add_capture_hooks(settings)
    add_capture_hooks(settings)  # a second boot of the attempt: nothing added twice
    data = json.loads(settings.read_text())
    assert data["model"] == "x"
    stop = data["hooks"]["Stop"]
    assert stop[0]["hooks"][0]["command"] == "mine"  # the user's own hook is kept, first
    assert [h["command"] for g in stop for h in g["hooks"]].count(HOOK_COMMAND) == 1
    post = data["hooks"]["PostToolUse"]
    assert post == [{"matcher": "*", "hooks": [{"type": "command", "command": HOOK_COMMAND}]}]
    assert settings.stat().st_mode & 0o777 == 0o640


def test_new_settings_are_private(tmp_path: Path) -> None:
    settings = tmp_path / "home" / "settings.json"
    add_capture_hooks(settings)
    assert settings.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    ("text", "what"),
    [("not json", "is not JSON"), ("[1]", "JSON object"), ('{"hooks": []}', "'hooks' is not an object"),
     ('{"hooks": {"Stop": {}}}', "hooks.Stop is not a list")],
)  # fmt: skip
def test_settings_that_cannot_be_merged_are_left_alone(tmp_path: Path, text: str, what: str) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(text)
    with pytest.raises(HookSettingsError, match=what):
        add_capture_hooks(settings)
    assert settings.read_text() == text


def test_the_hook_command_appends_a_byte_and_never_fails(tmp_path: Path) -> None:
    signal = tmp_path / "signal"
    signal.touch()
    for _ in range(3):
        r = subprocess.run(["sh", "-c", HOOK_COMMAND], env={SIGNAL_ENV: str(signal)}, check=False)
        assert r.returncode == 0
    assert signal.read_text() == "..."
    # no variable, or a file it cannot write: still exit 0 (the harness never sees a failing hook)
    assert subprocess.run(["sh", "-c", HOOK_COMMAND], env={}, check=False).returncode == 0
    bad = {SIGNAL_ENV: str(tmp_path / "missing-dir" / "signal")}
    assert subprocess.run(["sh", "-c", HOOK_COMMAND], env=bad, check=False).returncode == 0


# -- Codex's notify hook, on the command line ------------------------------------------------------
def _notify_of(argv: list[str]) -> list[str]:
    """The notify program a ``-c notify=[...]`` in ``argv`` sets, parsed the way Codex parses it (TOML)."""
    value = argv[argv.index("-c") + 1]
    return list(tomllib.loads(value)["notify"])


@pytest.mark.parametrize(
    ("agent", "at"),
    [
        (["codex", "exec", "--json", "fix it"], 2),
        (["codex", "exec", "resume", "0199"], 2),
        (["codex", "--model", "m", "fix it"], 1),
        (["/opt/bin/codex", "e", "fix it"], 2),
    ],
)
def test_codex_gets_its_notify_hook_after_the_subcommand(tmp_path: Path, agent: list[str], at: int) -> None:
    argv = harness_for("codex").with_capture_hook(agent, tmp_path)
    assert argv[:at] == agent[:at] and argv[at] == "-c" and argv[at + 2 :] == agent[at:]
    assert _notify_of(argv)[:2] == ["sh", "-c"] and len(_notify_of(argv)) == 4  # no program of the user's
    assert harness_for("claude").with_capture_hook(["claude", "-p", "x"], tmp_path) == ["claude", "-p", "x"]


def test_the_notify_hook_signals_then_runs_the_users_own_program_with_the_event(tmp_path: Path) -> None:
    """The user's config.toml keeps its notify: the hook runs it after the byte, with the event as the
    last argument, as Codex would have; the file itself is never touched."""
    seen = tmp_path / "seen"
    config = tmp_path / "config.toml"
    text = f'model = "m"\nnotify = ["sh", "-c", "printf \'%s|%s\' \\"$0\\" \\"$1\\" > {seen}", "arg one"]\n'
    config.write_text(text)
    argv = harness_for("codex").with_capture_hook(["codex", "exec", "go"], tmp_path)
    program = _notify_of(argv)
    signal = tmp_path / "signal"
    signal.touch()
    event = json.dumps({"type": "agent-turn-complete", "last-assistant-message": "secret words"})
    r = subprocess.run([*program, event], env={SIGNAL_ENV: str(signal), "PATH": "/usr/bin:/bin"}, check=False)
    assert r.returncode == 0
    assert signal.read_text() == "."
    assert seen.read_text() == f"arg one|{event}"
    assert config.read_text() == text
    # without a program of the user's, the event is ignored and the hook still succeeds
    alone = _notify_of(harness_for("codex").with_capture_hook(["codex"], tmp_path / "none"))
    r = subprocess.run([*alone, event], env={SIGNAL_ENV: str(signal)}, capture_output=True, check=False)
    assert (r.returncode, r.stdout, r.stderr) == (0, b"", b"")
    assert signal.read_text() == ".."


@pytest.mark.parametrize(
    "text", ["notify = [", 'notify = "just a string"', "notify = [1, 2]", "\xff\xfe"], ids=shlex.quote
)
def test_a_config_it_cannot_read_leaves_the_codex_command_as_it_is(tmp_path: Path, text: str) -> None:
    (tmp_path / "config.toml").write_bytes(text.encode("latin-1"))
    assert codex_notify_override(tmp_path / "config.toml") is None
    agent = ["codex", "exec", "go"]
    assert harness_for("codex").with_capture_hook(agent, tmp_path) == agent


# -- the policy ----------------------------------------------------------------------------------
def launch(capture: CapturePolicy | None) -> LaunchRecord:
    return LaunchRecord.model_validate(
        {
            "schema_version": 1,
            "authority": {"execution_id": "exe-1", "generation": 1, "task_id": "t", "seat_id": "s",
                          "swarm_id": "w", "grant_id": "g"},
            "harness": "claude",
            "agent": ["claude"],
            **({"capture": capture.model_dump()} if capture else {}),
        }
    )  # fmt: skip


def test_the_launch_record_policy_wins_over_the_defaults() -> None:
    record = CapturePolicy(mode="periodic", floor_seconds=5, interval_seconds=60)
    p = policy_of(WorkerSettings(), launch(record))
    assert (p.mode, p.floor, p.interval) == ("periodic", 5, 60)
    d = policy_of(WorkerSettings(), launch(None))
    assert (d.mode, d.floor, d.interval) == ("continuous", 1.0, 300.0)


def test_a_setting_from_the_pods_environment_wins_over_the_launch_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AGENTIHOOKS_CAPTURE_INTERVAL_SECONDS", "20")
    monkeypatch.setenv("AGENTIHOOKS_CAPTURE_MODE", "continuous")
    p = policy_of(WorkerSettings(), launch(CapturePolicy(mode="periodic", interval_seconds=600)))
    assert (p.mode, p.interval) == ("continuous", 20)


@pytest.mark.parametrize(
    "bad", [{"mode": "sometimes"}, {"floor_seconds": 0.01}, {"interval_seconds": 5}, {"every": 1}]
)
def test_a_bad_capture_policy_is_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="capture"):
        LaunchRecord.model_validate({**launch(None).model_dump(mode="json"), "capture": bad})
