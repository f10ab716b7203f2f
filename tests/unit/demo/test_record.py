"""The evidence record is replaced whole or not at all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agentihooks_demo.record import write_record


def test_record_written_whole(tmp_path: Path) -> None:
    path = tmp_path / "SV2-CKP-05" / "result.json"
    write_record(path, {"package": "SV2-CKP-05", "run": {"id": "r1"}})
    assert json.loads(path.read_text())["run"]["id"] == "r1"
    assert [p.name for p in path.parent.iterdir()] == ["result.json"]


def test_a_record_that_cannot_be_written_leaves_the_old_one(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    write_record(path, {"run": {"id": "old"}})
    with pytest.raises(TypeError):
        write_record(path, {"run": {"id": "new"}, "bad": object()})
    assert json.loads(path.read_text())["run"]["id"] == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]
