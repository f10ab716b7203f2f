"""The launch record a worker boots from, as the original writes it (COMPAT.md, "Launch record").

Each test names its rule (``LAUNCH-<n>``, listed in docs/compatibility.md).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from agentihooks_checkpoint.launch import LaunchRecord
from agentihooks_worker.attempt import AttemptLayout, task_folder
from agentihooks_worker.errors import LaunchRecordError
from agentihooks_worker.launch import parse_launch_record
from testsupport.original_records import original_launch_record


def test_launch_1_the_originals_record_parses_without_any_addition() -> None:
    """LAUNCH-1: schema_version 1, the six authority fields, harness, agent argv, the four budgets."""
    record = parse_launch_record(original_launch_record())
    assert record.authority.grant_id.startswith("lgr-") and record.registration is None
    assert (record.startup_seconds, record.kill_seconds) == (10, 2)
    assert record.restore is None and record.checkpoint_remote is False


@pytest.mark.parametrize(
    "task_id",
    ["github.com/acme/app:issue-42", "jira:ENG-7", "team/sub/task", "a:b/c@d.e-f", "a/../b", "t" + "/" * 127],
    ids=lambda t: f"LAUNCH-2-{t[:24]}",
)
def test_launch_2_task_id_may_hold_colon_and_slash(task_id: str, tmp_path: Path) -> None:
    """LAUNCH-2: the original's task_id rule is an identifier that may also hold ':' and '/'."""
    record = parse_launch_record(original_launch_record(task_id=task_id))
    assert record.authority.task_id == task_id
    layout = AttemptLayout(tmp_path, record.authority.execution_id, "claude", task_id)
    layout.create()
    worktrees = list((layout.root / "worktrees").iterdir())
    assert worktrees == [layout.worktree] and layout.worktree.parent == layout.root / "worktrees"
    assert "/" not in task_folder(task_id) and len(task_folder(task_id)) <= 200


@pytest.mark.parametrize(
    "task_id",
    ["", ":leading", "/leading", "with space", "x" * 129, "back\\slash"],
    ids=lambda t: f"LAUNCH-3-{t[:12]}",
)
def test_launch_3_other_task_ids_are_still_refused(task_id: str) -> None:
    """LAUNCH-3: outside that rule a task id is refused (first character alphanumeric, at most 128)."""
    with pytest.raises(LaunchRecordError):
        parse_launch_record(original_launch_record(task_id=task_id))


def test_launch_4_distinct_task_ids_never_share_a_worktree() -> None:
    """LAUNCH-4: the worktree folder of a task id is its own (':' and '/' are escaped, never dropped)."""
    ids = ["a:b", "a/b", "a-b", "a3Ab", "a2Fb", "ab", "a:/b", "a/:b"]
    folders = [task_folder(t) for t in ids]
    assert len(set(folders)) == len(folders)


def _set(rec: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(rec)
    *parents, last = path.split(".")
    cur = out
    for p in parents:
        cur = cur.setdefault(p, {})
    cur[last] = value
    return out


WITH_ADDITIONS = {
    **original_launch_record(),
    "registration": {
        "projects": ["github.com/example/repo"],
        "task_generation": 1,
        "compatibility_key": "v1",
    },
    "restore_from": {"execution_id": "exe-" + "9" * 32, "execution_generation": 1},
}


@pytest.mark.parametrize(
    "path",
    [
        "schema_version",
        "authority.generation",
        "registration.task_generation",
        "restore_from.execution_generation",
        "startup_seconds",
        "quiesce_seconds",
        "checkpoint_seconds",
        "kill_seconds",
    ],
    ids=lambda p: f"LAUNCH-5-{p}",
)
def test_launch_5_integer_fields_refuse_booleans(path: str) -> None:
    """LAUNCH-5: where the original takes an integer (or a number), a boolean is refused, never read as 1."""
    parse_launch_record(WITH_ADDITIONS)
    with pytest.raises(LaunchRecordError):
        parse_launch_record(_set(WITH_ADDITIONS, path, True))


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("authority.generation", "1"),
        ("authority.generation", 1.0),
        ("kill_seconds", "2"),
        ("startup_seconds", 301),
    ],
    ids=[
        "LAUNCH-6-generation-text",
        "LAUNCH-6-generation-float",
        "LAUNCH-6-budget-text",
        "LAUNCH-6-budget-over",
    ],
)
def test_launch_6_integers_are_json_integers_and_budgets_are_in_range(path: str, value: Any) -> None:
    """LAUNCH-6: no coercion: "1" and 1.0 are not generation 1; budgets are numbers in (0, 300]."""
    with pytest.raises(LaunchRecordError):
        parse_launch_record(_set(WITH_ADDITIONS, path, value))
    assert LaunchRecord.model_validate(_set(WITH_ADDITIONS, "kill_seconds", 0.5)).kill_seconds == 0.5
