"""Bytes to record and back, with the refusals the spec names.

Parsing is strict: the bytes must be one JSON object of at most
:data:`RECORD_SIZE_CAP` bytes, with no duplicate keys and no NaN; the major
version must be 2 (``unsupported_version`` otherwise) and the record must
satisfy the model of its minor (``invalid_record`` otherwise).
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from .errors import RecordRefused
from .model import SCHEMA_VERSION, CheckpointRecord
from .reasons import Reason

#: Records larger than this are refused unread (a sane manifest is a few KiB).
RECORD_SIZE_CAP = 1024 * 1024


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError("duplicate key")
        out[k] = v
    return out


def _no_constant(name: str) -> Any:
    raise ValueError("non-finite number")


def load_json(data: bytes) -> Any:
    """Strict JSON: UTF-8, no duplicate keys, no NaN/Infinity. Raises ``ValueError``."""
    try:
        return json.loads(data.decode("utf-8"), object_pairs_hook=_pairs, parse_constant=_no_constant)
    except (UnicodeDecodeError, RecursionError) as e:
        raise ValueError("not JSON") from e


def parse_record(data: bytes) -> CheckpointRecord:
    """Parse record bytes or raise :class:`RecordRefused` with the reason."""
    if len(data) > RECORD_SIZE_CAP:
        raise RecordRefused(Reason.INVALID_RECORD, "record exceeds the size cap")
    try:
        obj = load_json(data)
    except ValueError as e:
        raise RecordRefused(Reason.INVALID_RECORD, "record is not strict JSON") from e
    return record_from_obj(obj)


def record_from_obj(obj: Any) -> CheckpointRecord:
    """Validate a decoded JSON value as a record, refusing other majors first."""
    if not isinstance(obj, dict):
        raise RecordRefused(Reason.INVALID_RECORD, "record is not a JSON object")
    version = obj.get("schema_version")
    if not isinstance(version, str):
        raise RecordRefused(Reason.INVALID_RECORD, "schema_version is missing")
    major = re.match(r"^([0-9]+)\.[0-9]+$", version)
    if major is not None and major.group(1) != "2":
        raise RecordRefused(Reason.UNSUPPORTED_VERSION, "major version is not 2")
    if not re.fullmatch(SCHEMA_VERSION, version):
        raise RecordRefused(Reason.INVALID_RECORD, "schema_version is malformed")
    try:
        return CheckpointRecord.model_validate(obj)
    except (ValidationError, RecursionError) as e:
        raise RecordRefused(Reason.INVALID_RECORD, "record breaks the schema") from e


def encode_record(record: CheckpointRecord) -> bytes:
    """The bytes to store: fields that were set (unknown ones included), compact, sorted."""
    body = record.model_dump(mode="json", exclude_unset=True)
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
