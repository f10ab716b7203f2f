"""Record checks that need no store: scope, attempt, commit state, material, watermark, inventory."""

from __future__ import annotations

from typing import Any

import pytest
from agentihooks_checkpoint.checks import check_attempt, check_content, check_scope, required_roles
from agentihooks_checkpoint.errors import RecordRefused
from agentihooks_checkpoint.model import CheckpointRecord
from agentihooks_checkpoint.scope import StoreScope
from testsupport.checkpoints import sample_record

SCOPE = StoreScope(swarm="s", task_id="task-1", task_generation=1)


def rec(minor: int = 2, **kw: Any) -> CheckpointRecord:
    return CheckpointRecord.model_validate(sample_record(minor, **kw))


def reason(fn: Any, *args: Any, **kw: Any) -> str | None:
    try:
        fn(*args, **kw)
    except RecordRefused as e:
        return e.reason
    return None


def test_scope() -> None:
    assert reason(check_scope, rec(), SCOPE) is None
    assert reason(check_scope, rec(), SCOPE.model_copy(update={"task_generation": 2})) == "scope_mismatch"
    assert reason(check_scope, rec(), SCOPE.model_copy(update={"task_id": "task-2"})) == "scope_mismatch"


def test_attempt() -> None:
    ok = {"checkpoint_id": "ckpt-7", "execution_id": "exe-" + "a" * 32, "execution_generation": 2}
    assert reason(check_attempt, rec(), **ok) is None
    assert reason(check_attempt, rec(), **{**ok, "execution_generation": 1}) == "scope_mismatch"
    assert reason(check_attempt, rec(), **{**ok, "checkpoint_id": "ckpt-8"}) == "identity_mismatch"
    assert reason(check_attempt, rec(), **{**ok, "execution_id": "exe-other"}) == "identity_mismatch"
    # A legacy record's task generation stands in for its execution generation.
    assert reason(check_attempt, rec(1), **{**ok, "execution_generation": 1}) is None


def test_required_roles() -> None:
    assert required_roles(rec()) == {"transcript", "git_bundle"}
    assert required_roles(rec(head_commit="1" * 40)) == {"transcript"}
    assert "native_session" in required_roles(rec(native_resume_capability="qualified"))


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({}, None),
        ({"status": "preparing"}, "not_committed"),
        ({"committed_at": None}, "not_committed"),
        ({"native_resume_capability": "qualified"}, "missing_material"),
        ({"transcript_durable_cursor": {"byte_offset": 3}}, "missing_watermark"),
        ({"transcript_durable_cursor": None}, "missing_watermark"),
    ],
)
def test_content(kw: dict[str, Any], expected: str | None) -> None:
    assert reason(check_content, rec(**kw)) == expected


def test_legacy_inventory_comes_from_artifact_hashes() -> None:
    items = check_content(rec(1))
    assert sorted(i.role for i in items) == ["git_bundle", "transcript"]
    assert all(i.size is None and i.path == i.role for i in items)
