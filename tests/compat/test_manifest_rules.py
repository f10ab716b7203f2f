"""Checkpoint manifest: the original swarm v2 reading rules (COMPAT.md, "Checkpoint manifest").

Every test names the rule it pins (``MANIFEST-<n>``, listed in docs/compatibility.md).
The records are written by hand in ``testsupport.original_records``; none comes from
this product's writer, except where a rule is about what this product writes.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest
from agentihooks_checkpoint.checks import check_attempt, check_content, check_scope, legacy_path
from agentihooks_checkpoint.errors import RecordRefused
from agentihooks_checkpoint.model import WRITTEN_FIELDS, CheckpointRecord, missing_written_fields
from agentihooks_checkpoint.record import encode_record, parse_record
from agentihooks_checkpoint.schema import checkpoint_schema
from agentihooks_checkpoint.scope import StoreScope
from testsupport.checkpoints import sample_record
from testsupport.original_records import EXECUTION, QUIESCENCE_FIELDS, manifest_bytes, original_manifest

SCOPE = StoreScope(swarm="swarm-a", task_id="task-1", task_generation=1)
SCHEMA = jsonschema.Draft202012Validator(checkpoint_schema())


def parsed(rec: dict[str, Any]) -> CheckpointRecord:
    """Read ``rec`` the way every reader of the product does; the JSON Schema must agree."""
    record = parse_record(manifest_bytes(rec))
    assert SCHEMA.is_valid(rec), "the documented schema refuses a record the model reads"
    return record


def refusal(rec: dict[str, Any]) -> str:
    with pytest.raises(RecordRefused) as e:
        parse_record(manifest_bytes(rec))
    return e.value.reason


def restore_reason(record: CheckpointRecord) -> str | None:
    """The verification reason the record-only checks give (no objects involved), or None."""
    try:
        check_scope(record, SCOPE)
        check_attempt(
            record, checkpoint_id=record.checkpoint_id, execution_id=EXECUTION, execution_generation=1
        )
        check_content(record)
    except RecordRefused as e:
        return e.reason
    return None


@pytest.mark.parametrize("minor", [0, 1, 2, 3, 9, 10, 42], ids=lambda m: f"MANIFEST-1-minor-2.{m}")
def test_manifest_1_any_minor_of_major_2_is_read(minor: int) -> None:
    """MANIFEST-1: a reader accepts any 2.x, minors newer than it knows included (minors are additive)."""
    record = parsed(original_manifest(minor))
    assert record.schema_version == f"2.{minor}"
    assert restore_reason(record) is None


@pytest.mark.parametrize("minor", [2, 9], ids=lambda m: f"MANIFEST-2-newer-minor-2.{m}")
def test_manifest_2_newer_minor_with_an_extra_optional_field_is_valid(minor: int) -> None:
    """MANIFEST-2: the original's newer-minor fixture (2.2, an extra optional field) is valid; so is 2.9."""
    rec = original_manifest(minor, handoff_hint={"by": "a newer writer", "n": [1, 2]})
    record = parsed(rec)
    assert record.unknown_fields == {"handoff_hint": {"by": "a newer writer", "n": [1, 2]}}
    assert restore_reason(record) is None


@pytest.mark.parametrize("minor", [0, 1], ids=lambda m: f"MANIFEST-3-older-schema-2.{m}")
def test_manifest_3_older_schema_without_the_quiescence_fields_is_read(minor: int) -> None:
    """MANIFEST-3: a 2.0 or 2.1 record of the original's older schema lacks the three quiescence fields."""
    rec = original_manifest(minor, newer_schema=False)
    assert not set(QUIESCENCE_FIELDS) & set(rec)
    record = parsed(rec)
    assert record.quiescence_method is None and record.restore_constraints is None
    assert restore_reason(record) is None


@pytest.mark.parametrize("minor", [0, 1, 2, 5], ids=lambda m: f"MANIFEST-4-newer-schema-2.{m}")
def test_manifest_4_newer_schema_carries_the_quiescence_fields_at_every_minor(minor: int) -> None:
    """MANIFEST-4: the original's newer schema writes the three quiescence fields at every minor."""
    record = parsed(original_manifest(minor, newer_schema=True))
    assert record.quiescence_method == "stopped_process"
    assert record.dependencies_manifest == {"python": "3.11"}
    assert record.restore_constraints == ["same-project"]


def test_manifest_5_minor_2_1_only_added_the_optional_trace_id() -> None:
    """MANIFEST-5: 2.1 added only the optional trace_id; a 2.1 record without it is still valid."""
    rec = original_manifest(1, newer_schema=False)
    del rec["trace_id"]
    parsed(rec)
    assert parsed(original_manifest(1)).trace_id == "0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize("version", ["1.0", "3.0", "0.9", "10.2"], ids=lambda v: f"MANIFEST-6-major-{v}")
def test_manifest_6_other_majors_are_unsupported_version(version: str) -> None:
    """MANIFEST-6: a reader refuses other majors with unsupported_version (not invalid_record)."""
    assert refusal(original_manifest(1, schema_version=version)) == "unsupported_version"


@pytest.mark.parametrize("minor", [0, 2, 9], ids=lambda m: f"MANIFEST-7-relay-2.{m}")
def test_manifest_7_unknown_optional_fields_are_kept_when_relayed(minor: int) -> None:
    """MANIFEST-7: a relayed record keeps unknown optional fields (top level, cursor, extensions)."""
    rec = original_manifest(
        minor,
        future_field={"nested": [1, "two", None]},
        extensions={"vendor.example/x": {"y": 1}},
        transcript_durable_cursor={"sequence": 1, "byte_offset": 90, "segment": "s-1"},
    )
    assert json.loads(encode_record(parsed(rec))) == rec


def test_manifest_8_records_without_execution_generation_use_the_task_generation() -> None:
    """MANIFEST-8: no original minor has authority.execution_generation; the task generation stands in."""
    rec = original_manifest(9, task_generation=3)
    record = parse_record(manifest_bytes(rec))
    assert record.authority.execution_generation is None
    assert record.authority.effective_execution_generation == 3
    with pytest.raises(RecordRefused) as e:
        check_attempt(
            record, checkpoint_id=record.checkpoint_id, execution_id=EXECUTION, execution_generation=1
        )
    assert e.value.reason == "scope_mismatch"


def test_manifest_9_authority_names_stay_inside_the_closed_authority() -> None:
    """MANIFEST-9: authority is closed and authority names never appear at the top level."""
    rec = original_manifest(2)
    assert refusal({**rec, "task_id": "task-1"}) == "invalid_record"
    inner = copy.deepcopy(rec)
    inner["authority"]["brain"] = "x"
    assert refusal(inner) == "invalid_record"


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda r: r.update(transcript_durable_cursor={"byte_offset": 10}), "missing_watermark"),
        (lambda r: r.update(transcript_durable_cursor={"sequence": "12"}), "missing_watermark"),
        (lambda r: r.update(artifact_hashes={}), "missing_material"),
        (lambda r: r.update(head_commit="b" * 40), "missing_material"),
        (lambda r: r["authority"].update(task_id="task-2"), "scope_mismatch"),
        (lambda r: r["authority"].update(task_generation=2), "scope_mismatch"),
        (lambda r: r.update(committed_at=None), "not_committed"),
    ],
    ids=[
        "MANIFEST-10-no-watermark",
        "MANIFEST-10-unusable-watermark",
        "MANIFEST-10-no-transcript",
        "MANIFEST-10-no-git-bundle",
        "MANIFEST-10-other-task",
        "MANIFEST-10-newer-task-generation",
        "MANIFEST-10-uncommitted",
    ],
)
def test_manifest_10_what_a_restore_lacks_is_a_verification_reason(edit: Any, reason: str) -> None:
    """MANIFEST-10: what a restore needs and a valid record lacks is a verification reason, not invalid."""
    rec = original_manifest(9, newer_schema=False)
    edit(rec)
    assert restore_reason(parsed(rec)) == reason


def test_manifest_11_a_record_without_inventory_is_verified_by_digest_at_any_minor() -> None:
    """MANIFEST-11: the original writes no artifacts inventory; objects are checked by digest at any minor."""
    rec = original_manifest(
        9, artifact_hashes={**original_manifest(9)["artifact_hashes"], "Odd-Role/x": "sha256:" + "c" * 64}
    )
    items = check_content(parsed(rec))
    assert {(i.role, i.path, i.size) for i in items} == {
        ("transcript", "transcript", None),
        ("Odd-Role/x", legacy_path("Odd-Role/x"), None),
    }
    assert "/" not in legacy_path("Odd-Role/x")


def test_manifest_12_project_id_takes_the_originals_patterns() -> None:
    """MANIFEST-12: project_id is github.com/<owner>/<repo>, local:<name> or unknown (the original's rule)."""
    for project in ("github.com/o/r", "local:demo", "local:.hidden-name", "unknown"):
        rec = original_manifest(2)
        rec["authority"]["project_id"] = project
        parsed(rec)
    rec = original_manifest(2)
    rec["authority"]["project_id"] = "gitlab.com/o/r"
    assert refusal(rec) == "invalid_record"


def test_manifest_13_this_products_records_carry_everything_it_needs() -> None:
    """MANIFEST-13: optional on read, the added fields are always in a record this product writes."""
    ours = CheckpointRecord.model_validate(sample_record(2))
    assert missing_written_fields(ours) == []
    theirs = parsed(original_manifest(2, newer_schema=False))
    assert set(missing_written_fields(theirs)) == set(WRITTEN_FIELDS)
