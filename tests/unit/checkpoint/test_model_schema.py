"""The JSON Schema and the pydantic model accept and refuse the same records, minor by minor."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from agentihooks_checkpoint.errors import RecordRefused
from agentihooks_checkpoint.model import CheckpointRecord
from agentihooks_checkpoint.record import RECORD_SIZE_CAP, encode_record, parse_record
from agentihooks_checkpoint.schema import checkpoint_schema, schema_bytes
from pydantic import ValidationError
from testsupport.checkpoints import sample_record

ROOT = Path(__file__).resolve().parents[3]


def schema_ok(rec: Any) -> bool:
    return jsonschema.Draft202012Validator(checkpoint_schema()).is_valid(rec)


def model_ok(rec: Any) -> bool:
    try:
        CheckpointRecord.model_validate(rec)
    except ValidationError:
        return False
    return True


def with_(rec: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(rec)
    *parents, last = path.split(".")
    cur: Any = out
    for p in parents:
        cur = cur[int(p)] if isinstance(cur, list) else cur[p]
    if value is DELETE:
        del cur[last]
    elif isinstance(cur, list):
        cur[int(last)] = value
    else:
        cur[last] = value
    return out


DELETE = object()


def test_documented_and_packaged_schema_are_identical() -> None:
    assert (ROOT / "docs/swarm-v2/schemas/checkpoint.json").read_bytes() == schema_bytes()
    jsonschema.Draft202012Validator.check_schema(checkpoint_schema())


VALID = [
    sample_record(0),
    sample_record(1),
    sample_record(2),
    sample_record(3),  # a later minor is read with the same rules
    sample_record(12),
    sample_record(1, native_session_id=None, native_harness_version="2.1.295"),
    sample_record(2, native_resume_capability="qualified", native_session_id="sess-1"),
    sample_record(2, committed_at=None, status="uploading"),
    sample_record(2, transcript_durable_cursor=None),
    sample_record(2, transcript_durable_cursor={}),
    sample_record(2, transcript_durable_cursor={"sequence": 1, "vendor_extra": None}),
    sample_record(2, unknown_future_field={"kept": True}, trace_id="f" * 32, extensions={"x": 1}),
    with_(sample_record(2), "authority.controller_epoch", 4),
    with_(sample_record(1), "authority.swarm_id", "swarm-a"),
    sample_record(2, exclusions=["node_modules"], artifact_hashes=sample_record(2)["artifact_hashes"]),
    with_(sample_record(0), "authority.project_id", "local:demo"),
    with_(sample_record(0), "authority.project_id", "unknown"),
    # Minors are additive: nothing beyond the original's oldest required set is required at any minor;
    # what a restore needs and a record lacks is a verification reason (tests/compat pins each rule).
    with_(sample_record(2), "transcript_durable_cursor", {"sequence": -1}),
    with_(sample_record(2), "transcript_durable_cursor", {"sequence": "1"}),
    with_(sample_record(2), "artifact_hashes", {"Bad Role": "sha256:" + "0" * 64}),
    with_(sample_record(2), "authority.execution_generation", DELETE),
    with_(sample_record(2), "compatibility_key", DELETE),
    with_(sample_record(2), "artifacts", DELETE),
    with_(sample_record(1), "quiescence_method", DELETE),
    with_(sample_record(1), "restore_constraints", DELETE),
    sample_record(9, newer_minor_field={"kept": True}),
]

INVALID = [
    with_(sample_record(2), "schema_version", "2.01"),
    with_(sample_record(2), "schema_version", "3.0"),
    with_(sample_record(2), "schema_version", 2),
    with_(sample_record(2), "operation_id", DELETE),
    with_(sample_record(2), "checkpoint_sequence", -1),
    with_(sample_record(2), "checkpoint_sequence", "7"),
    with_(sample_record(2), "checkpoint_sequence", True),
    with_(sample_record(2), "status", "done"),
    with_(sample_record(2), "created_at", "2026-11-30 08:00:00"),
    with_(sample_record(2), "committed_at", DELETE),
    with_(sample_record(2), "native_resume_capability", "yes"),
    with_(sample_record(2), "base_commit", "abc"),
    with_(sample_record(2), "head_commit", "G" * 40),
    with_(sample_record(2), "branch_name", ""),
    with_(sample_record(2), "branch_name", "b" * 256),
    with_(sample_record(2), "transcript_durable_cursor", DELETE),
    with_(sample_record(2), "artifact_hashes", {"transcript": "md5:00"}),
    with_(sample_record(2), "artifact_hashes", []),
    with_(sample_record(2), "exclusions", [1]),
    with_(sample_record(2), "exclusions", "x"),
    with_(sample_record(2), "execution_id", "exe-1"),  # authority names never at the top level
    with_(sample_record(0), "task_generation", 1),
    with_(sample_record(2), "authority.extra", 1),  # authority is closed
    with_(sample_record(2), "authority.task_generation", 0),
    with_(sample_record(2), "authority.project_id", "gitlab.com/x/y"),
    with_(sample_record(2), "authority.execution_id", "-bad"),
    with_(sample_record(2), "authority.execution_generation", None),
    with_(sample_record(2), "harness", "gemini"),
    with_(sample_record(2), "artifacts.0.path", "../escape"),
    with_(sample_record(2), "artifacts.0.path", "/etc/passwd"),
    with_(sample_record(2), "artifacts.0.path", "a/../../b"),
    with_(sample_record(2), "artifacts.0.path", ".hidden"),
    with_(sample_record(2), "artifacts.0.path", "a\\b"),
    with_(sample_record(2), "artifacts.0.size", -5),
    with_(sample_record(2), "artifacts.0.size", 1.5),
    with_(sample_record(2), "artifacts.0.extra", 1),
    with_(sample_record(1), "quiescence_method", "whenever"),
    with_(sample_record(2), "trace_id", "xyz"),
    with_(sample_record(2), "native_session_id", "bad id"),
    with_(sample_record(2), "extensions", None),
    with_(sample_record(2), "extensions", []),
    "not an object",
    [sample_record(2)],
]


@pytest.mark.parametrize("rec", VALID, ids=range(len(VALID)))
def test_valid_samples_pass_schema_and_model(rec: dict[str, Any]) -> None:
    assert schema_ok(rec)
    assert model_ok(rec)


@pytest.mark.parametrize("rec", INVALID, ids=range(len(INVALID)))
def test_invalid_samples_fail_schema_and_model(rec: Any) -> None:
    assert not schema_ok(rec)
    assert not model_ok(rec)


def test_legacy_record_uses_task_generation_for_execution_generation() -> None:
    legacy = CheckpointRecord.model_validate(sample_record(1))
    assert legacy.authority.execution_generation is None
    assert legacy.authority.effective_execution_generation == 1
    new = CheckpointRecord.model_validate(sample_record(2))
    assert new.authority.effective_execution_generation == 2


def test_relaying_keeps_unknown_fields_and_adds_nothing() -> None:
    rec = sample_record(0, future={"a": [1, 2]}, extensions={"vendor": "x"})
    out = json.loads(encode_record(parse_record(json.dumps(rec).encode())))
    assert out == rec


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"{not json", "invalid_record"),
        (b"\xff\xfe", "invalid_record"),
        (b"[]", "invalid_record"),
        (b'{"schema_version": "2.2", "schema_version": "2.2"}', "invalid_record"),
        (json.dumps(sample_record(2, checkpoint_sequence=float("nan"))).encode(), "invalid_record"),
        (json.dumps(sample_record(2, schema_version="3.0")).encode(), "unsupported_version"),
        (json.dumps(sample_record(2, schema_version="1.4")).encode(), "unsupported_version"),
        (json.dumps(sample_record(2, schema_version="two")).encode(), "invalid_record"),
        (json.dumps(sample_record(2, schema_version=2.2)).encode(), "invalid_record"),
        (json.dumps(sample_record(2, status=None)).encode(), "invalid_record"),
        (b"[" * 100000 + b"]" * 100000, "invalid_record"),
        (b" " * (RECORD_SIZE_CAP + 1), "invalid_record"),
    ],
)
def test_parse_record_refusals(data: bytes, reason: str) -> None:
    with pytest.raises(RecordRefused) as exc:
        parse_record(data)
    assert exc.value.reason == reason
