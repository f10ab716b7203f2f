"""Launch record reading: the original shape parses; disagreeing directives are refused as malformed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agentihooks_checkpoint.directive import Continuity
from agentihooks_worker.errors import EXIT_REFUSED, Refused
from agentihooks_worker.launch import read_launch_record


def record(**extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "schema_version": 1,
        "authority": {
            "execution_id": "exe-2",
            "generation": 2,
            "task_id": "task-1",
            "seat_id": "eng-2",
            "swarm_id": "example",
            "grant_id": "g-1",
        },
        "harness": "claude",
        "agent": ["claude", "-p"],
    }
    base.update(extra)
    return base


RESTORE = {
    "registration": {"projects": ["local:demo"], "task_generation": 1, "compatibility_key": "img:1"},
    "restore_from": {"execution_id": "exe-1", "execution_generation": 1},
}


def write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "launch.json"
    path.write_text(json.dumps(data))
    return path


def test_original_shape_parses(tmp_path: Path) -> None:
    rec = read_launch_record(write(tmp_path, record(control_url="http://c", exporter=["x"])))
    assert rec.authority.execution_id == "exe-2"
    assert rec.restore is None and rec.checkpoint_remote is False


def test_native_directive_parses(tmp_path: Path) -> None:
    d = {"checkpoint_id": "ckpt-7", "recovery": "native", "session_id": "s-1", "watermark": 412}
    rec = read_launch_record(write(tmp_path, record(restore=d, **RESTORE)))
    assert rec.restore is not None and rec.restore.recovery is Continuity.NATIVE


@pytest.mark.parametrize(
    ("directive", "fragment"),
    [
        ({"checkpoint_id": "ckpt-7", "recovery": "fresh"}, "fresh directive names no checkpoint"),
        ({"checkpoint_id": "ckpt-7", "recovery": "native", "watermark": 3}, "must name the session id"),
        ({"recovery": "sideways"}, "recovery"),
        (
            {"checkpoint_id": "c", "recovery": "reconstructed", "session_id": "s", "watermark": 1},
            "only a native",
        ),
        ({"recovery": "reconstructed", "watermark": 1}, "must name a checkpoint"),
    ],
)
def test_disagreeing_directive_is_malformed(tmp_path: Path, directive: dict[str, Any], fragment: str) -> None:
    with pytest.raises(Refused) as info:
        read_launch_record(write(tmp_path, record(restore=directive, **RESTORE)))
    assert info.value.reason == "malformed_directive"
    assert info.value.message.startswith("malformed restore directive")
    assert fragment in info.value.message
    assert info.value.exit_code == EXIT_REFUSED


@pytest.mark.parametrize("missing", ["registration", "restore_from"])
def test_checkpoint_restore_needs_its_source(tmp_path: Path, missing: str) -> None:
    d = {"checkpoint_id": "ckpt-7", "recovery": "reconstructed", "watermark": 4}
    extra = {k: v for k, v in RESTORE.items() if k != missing}
    with pytest.raises(Refused, match=missing) as info:
        read_launch_record(write(tmp_path, record(restore=d, **extra)))
    assert info.value.reason == "malformed_directive"


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"{", "not JSON"),
        (b"[]", "not a JSON object"),
        (json.dumps(record(harness="gemini")).encode(), "harness"),
        (json.dumps(record(agent=[])).encode(), "agent"),
        (json.dumps(record(kill_seconds=301)).encode(), "kill_seconds"),
    ],
)
def test_bad_launch_record(tmp_path: Path, content: bytes, fragment: str) -> None:
    path = tmp_path / "launch.json"
    path.write_bytes(content)
    with pytest.raises(Refused, match=fragment) as info:
        read_launch_record(path)
    assert info.value.reason == "invalid_launch_record"


def test_missing_launch_record(tmp_path: Path) -> None:
    with pytest.raises(Refused, match="unreadable"):
        read_launch_record(tmp_path / "nope.json")
