"""Continuous capture with a real boot: an abrupt death loses nothing the agent finished.

The fake Claude runs the ``Stop`` hooks of its settings after each turn, as Claude
Code does; the worker merged its own into them. The worker process and the
harness are SIGKILLed together (a node crash leaves nothing to take a final
capture), and the newest committed checkpoint must hold every turn the agent
wrote. With the periodic capture alone (300 s) it would hold none of them.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from agentihooks_checkpoint.validator import Validator
from agentihooks_worker.attempt import AttemptLayout

from .conftest import NEW_EXECUTION, SCOPE, ScenarioFactory, events
from .test_boot_crash_and_signals import start_cli, wait_for

TURNS = 12


def _transcript(sc_tmp: Path, layout_home: Path) -> Path:
    found = sorted((layout_home / "projects").glob("*/*.jsonl"), key=lambda p: p.stat().st_mtime_ns)
    assert found, "the harness wrote no transcript"
    return found[-1]


def test_an_abrupt_death_after_the_last_turn_loses_no_turn(scenario: ScenarioFactory) -> None:
    sc = scenario("claude", "native")
    sc.settings = sc.settings.model_copy(
        update={"capture_mode": "continuous", "capture_interval_seconds": 300, "capture_floor_seconds": 0.2}
    )
    sc.environ["AGENTIHOOKS_CAPTURE_FLOOR_SECONDS"] = "0.2"
    proc = start_cli(sc, FAKE_HARNESS_TICK="0.15", FAKE_HARNESS_TICKS=str(TURNS))
    home = sc.layout.claude_config_dir
    wait_for((sc.tmp / "ready").exists, proc)
    harness_pid = int((sc.tmp / "ready").read_text())

    def turns_written() -> int:
        path = _transcript(sc.tmp, home)
        return sum(1 for line in path.read_text().splitlines() if '"tick"' in line)

    def newest_watermark() -> int:
        mine = sc.store.list_checkpoints(SCOPE, execution_id=NEW_EXECUTION)
        return max((c.watermark for c in mine if c.watermark is not None), default=-1)

    wait_for(lambda: turns_written() == TURNS, proc)
    records = _transcript(sc.tmp, home).read_bytes().count(b"\n")  # the restored records hold U+2028
    # every finished turn is in a committed checkpoint, with nobody stopping the agent
    wait_for(lambda: newest_watermark() == records - 1, proc)

    # the whole Pod dies at once: the worker and the harness, no final capture
    os.kill(proc.pid, signal.SIGKILL)
    os.kill(harness_pid, signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    committed = events(err, "checkpoint_committed")
    whens = [e["when"] for e in committed]
    assert whens[0] == "initial" and "final" not in whens and "periodic" not in whens
    assert "event" in whens
    # coalesced: never more captures than turns (each turn fired a hook and grew the transcript)
    assert 1 <= whens.count("event") <= TURNS + 1

    # the newest checkpoint verifies, and its transcript is the agent's, byte for byte
    newest = max(
        sc.store.list_checkpoints(SCOPE, execution_id=NEW_EXECUTION), key=lambda c: c.checkpoint_sequence
    )
    stage = sc.tmp / "stage"
    verdict = Validator().verify(
        sc.store,
        SCOPE,
        newest.checkpoint_id,
        execution_id=NEW_EXECUTION,
        execution_generation=2,
        stage_dir=stage,
    )
    assert verdict.ok and verdict.record is not None and verdict.record.native
    staged = [p for p in stage.rglob("*") if p.is_file()]
    transcript = _transcript(sc.tmp, home).read_bytes()
    assert any(p.read_bytes() == transcript for p in staged) or any(
        transcript in p.read_bytes() for p in staged
    ), "the newest checkpoint does not hold the whole transcript"

    # the event captures sent what the transcript gained: the newest lists its artifacts as segments
    segments = verdict.record.segments or {}
    assert len(segments.get("transcript", [])) >= 2 and len(segments.get("native_session", [])) >= 4

    # the next attempt restores natively from that segmented checkpoint: the same session, whole
    third = {
        **sc.launch,
        "authority": {**sc.launch["authority"], "execution_id": "exe-third", "generation": 3},
        "restore_from": {"execution_id": NEW_EXECUTION, "execution_generation": 2},
        "restore": {
            "checkpoint_id": newest.checkpoint_id,
            "recovery": "native",
            "watermark": verdict.record.watermark,
            "session_id": verdict.record.native_session_id,
        },
    }
    sc.launch = third
    again = start_cli(sc, FAKE_HARNESS_RUN_SECONDS="0")
    _, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert [e["recovery"] for e in events(err, "restore_verified")] == ["native"]
    layout = AttemptLayout(sc.settings.attempts_dir, "exe-third", "claude", SCOPE.task_id)
    restored = sorted((layout.claude_config_dir / "projects").glob("*/*.jsonl"))
    assert len(restored) == 1 and restored[0].read_bytes().startswith(transcript)

    # the hooks really ran in the harness and reached the worker through the signal file
    assert (home / "hooks-run.log").read_text().splitlines() == ["Stop"] * TURNS
    settings = json.loads((home / "settings.json").read_text())
    assert set(settings["hooks"]) == {"Stop", "PostToolUse"}
