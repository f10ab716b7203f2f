"""The checkpoint record: the swarm v2 checkpoint manifest, major 2, as a pydantic model.

Reading follows the original swarm v2 rules: minors are additive, so every
2.x parses with the same rules, a minor newer than any this package knows
included, and fields nobody here knows are kept (a relayed record loses
nothing). No field beyond the original's oldest required set is required at
any minor: the original's own schemas disagree over time on whether
``quiescence_method``, ``dependencies_manifest`` and ``restore_constraints``
are required, and the fields this package adds (``authority.execution_generation``,
``compatibility_key``, ``harness``, ``artifacts``) are never written by the
original. What a restore needs and a record lacks is a verification reason
(:mod:`.checks`), never a parse failure.

Records this package writes (minor :data:`WRITTEN_VERSION`) always carry
every field in :data:`WRITTEN_FIELDS`; :func:`missing_written_fields` checks
that before a capture commits. ``docs/swarm-v2/schemas/checkpoint.json``
says the same thing as JSON Schema, and the tests hold the two together.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

IDENTIFIER = r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$"
TIMESTAMP = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z$"
DIGEST = r"^sha256:[0-9a-f]{64}$"
COMMIT = r"^[0-9a-f]{40}$"
#: As the original's common definitions: ``local:`` takes any run of name characters.
PROJECT_ID = r"^(github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+|local:[A-Za-z0-9._-]+|unknown)$"
SCHEMA_VERSION = r"^2\.(0|[1-9][0-9]*)$"
ROLE = r"^[a-z][a-z0-9_]{0,63}$"
#: A relative artifact path: segments never start with a dot, so no ``..``, no absolute path.
RELATIVE_PATH = (
    r"^[A-Za-z0-9_@+=,-][A-Za-z0-9._@+=,-]{0,127}(/[A-Za-z0-9_@+=,-][A-Za-z0-9._@+=,-]{0,127}){0,15}$"
)

#: The minor this package writes.
WRITTEN_VERSION = "2.2"
#: The minor of a record with ``segments`` (a continuous capture's: :mod:`.checks`).
SEGMENTED_VERSION = "2.3"
KNOWN_MINORS = (0, 1, 2, 3)
#: Most stored objects one artifact may be assembled from (a record listing more is refused).
MAX_SEGMENTS = 64
#: Optional on read, always present in a record this package writes (``authority.`` marks a nested name).
WRITTEN_FIELDS = (
    "quiescence_method",
    "dependencies_manifest",
    "restore_constraints",
    "compatibility_key",
    "harness",
    "artifacts",
    "authority.execution_generation",
)

#: Names that belong inside ``authority`` and may never appear at the top level.
AUTHORITY_NAMES = frozenset(
    {
        "execution_id",
        "execution_generation",
        "task_id",
        "task_generation",
        "controller_epoch",
        "swarm_id",
        "seat_id",
        "grant_ref",
        "project_id",
    }
)


class Role(StrEnum):
    """Artifact roles of the inventory (the keys of ``artifact_hashes``)."""

    TRANSCRIPT = "transcript"
    NATIVE_SESSION = "native_session"
    GIT_BUNDLE = "git_bundle"
    SOURCE_PATCH = "source_patch"
    UNTRACKED = "untracked"


#: Roles whose object is a tar archive of regular files (member names relative).
ARCHIVE_ROLES = frozenset({Role.NATIVE_SESSION, Role.UNTRACKED})

_STRICT = ConfigDict(strict=True, frozen=True, extra="forbid")

#: Optional fields whose value may be an explicit ``null`` (all others may only be left out).
NULLABLE = frozenset({"committed_at", "transcript_durable_cursor", "native_session_id"})


def _no_explicit_null(model: BaseModel) -> None:
    declared = type(model).model_fields
    for name in model.model_fields_set:
        if name in declared and name not in NULLABLE and getattr(model, name) is None:
            raise ValueError(f"{name} may be left out but not null")


class Authority(BaseModel):
    """Who captured the checkpoint. Closed: nothing else may appear here."""

    model_config = _STRICT

    execution_id: str = Field(pattern=IDENTIFIER)
    task_id: str = Field(pattern=IDENTIFIER)
    task_generation: int = Field(ge=1)
    project_id: str = Field(pattern=PROJECT_ID)
    execution_generation: int | None = Field(default=None, ge=1)
    controller_epoch: int | None = Field(default=None, ge=0)
    swarm_id: str | None = Field(default=None, pattern=IDENTIFIER)
    seat_id: str | None = Field(default=None, pattern=IDENTIFIER)
    grant_ref: str | None = Field(default=None, pattern=IDENTIFIER)

    @model_validator(mode="after")
    def _nulls(self) -> Authority:
        _no_explicit_null(self)
        return self

    @property
    def effective_execution_generation(self) -> int:
        """The attempt's generation; legacy records carry only the task generation."""
        return self.execution_generation if self.execution_generation is not None else self.task_generation


class Cursor(BaseModel):
    """``transcript_durable_cursor``: how far the transcript was durably archived.

    The original's schema only says it is an object, so any object parses;
    :attr:`watermark` is the ``sequence`` when that is a usable record number
    (an integer >= 0), and ``None`` otherwise (a restore then refuses
    ``missing_watermark``). This package writes ``sequence`` and ``byte_offset``.
    """

    model_config = ConfigDict(strict=True, frozen=True, extra="allow")

    sequence: Any = None
    byte_offset: Any = None

    @property
    def watermark(self) -> int | None:
        seq = self.sequence
        return seq if isinstance(seq, int) and not isinstance(seq, bool) and seq >= 0 else None


class ArtifactEntry(BaseModel):
    """One inventory row: role, relative path it is staged under, exact size and digest."""

    model_config = _STRICT

    role: str = Field(pattern=ROLE)
    path: str = Field(pattern=RELATIVE_PATH)
    size: int = Field(ge=0)
    digest: str = Field(pattern=DIGEST)


class Segment(BaseModel):
    """One stored object of an artifact kept in pieces: its digest and exact size."""

    model_config = _STRICT

    digest: str = Field(pattern=DIGEST)
    size: int = Field(ge=0)


class CheckpointRecord(BaseModel):
    """One checkpoint manifest. Unknown top-level fields are kept (relayed unchanged)."""

    model_config = ConfigDict(strict=True, frozen=True, extra="allow")

    schema_version: str = Field(pattern=SCHEMA_VERSION)
    operation_id: str = Field(pattern=IDENTIFIER)
    trace_id: str | None = Field(default=None, pattern=r"^[0-9a-f]{32}$")
    extensions: dict[str, Any] | None = None
    authority: Authority
    checkpoint_id: str = Field(pattern=IDENTIFIER)
    checkpoint_sequence: int = Field(ge=0)
    status: Literal["preparing", "uploading", "complete", "rejected"]
    created_at: str = Field(pattern=TIMESTAMP)
    committed_at: str | None = Field(pattern=TIMESTAMP)
    native_resume_capability: Literal["qualified", "unsupported", "unverified"]
    base_commit: str = Field(pattern=COMMIT)
    head_commit: str = Field(pattern=COMMIT)
    branch_name: str = Field(min_length=1, max_length=255)
    transcript_durable_cursor: Cursor | None
    #: Artifact role -> digest. The original puts no rule on role names; the roles this package
    #: knows (:class:`Role`) match :data:`ROLE`.
    artifact_hashes: dict[str, str]
    exclusions: list[str]
    # -- optional at every minor; the original's newer schema requires them, its older one does not --
    quiescence_method: (
        Literal["harness_snapshot", "stopped_process", "consistent_export", "partial_capture"] | None
    ) = None
    dependencies_manifest: dict[str, Any] | None = None
    restore_constraints: list[str] | None = None
    native_harness_version: str | None = Field(default=None, min_length=1)
    native_session_id: str | None = Field(default=None, pattern=IDENTIFIER)
    # -- added by this package (written at minor 2.2, optional on read at every minor) --
    compatibility_key: str | None = Field(default=None, min_length=1, max_length=255)
    harness: Literal["claude", "codex"] | None = None
    artifacts: list[ArtifactEntry] | None = None
    #: Added at minor 2.3: artifact role -> the stored objects whose bytes, in order, are that artifact
    #: (its inventory row and ``artifact_hashes`` still name the whole artifact's size and digest). A
    #: continuous capture sends only what the transcript gained; the whole artifact is never stored.
    segments: dict[str, list[Segment]] | None = None

    @property
    def minor(self) -> int:
        return int(self.schema_version.split(".", 1)[1])

    @property
    def watermark(self) -> int | None:
        c = self.transcript_durable_cursor
        return None if c is None else c.watermark

    @property
    def committed(self) -> bool:
        return self.status == "complete" and self.committed_at is not None

    @property
    def native(self) -> bool:
        return self.native_resume_capability == "qualified" and Role.NATIVE_SESSION in self.artifact_hashes

    @model_validator(mode="after")
    def _rules(self) -> CheckpointRecord:
        """Rules that hold at every minor (none depends on the minor: minors are additive)."""
        _no_explicit_null(self)
        extra = set(self.model_extra or {})
        if extra & AUTHORITY_NAMES:
            raise ValueError("authority names belong inside authority")
        for digest in self.artifact_hashes.values():
            if not isinstance(digest, str) or not re.fullmatch(DIGEST, digest):
                raise ValueError("artifact_hashes maps roles to sha256 digests")
        if not all(isinstance(x, str) for x in self.exclusions):
            raise ValueError("exclusions are strings")
        if any(not re.fullmatch(ROLE, role) for role in self.segments or {}):
            raise ValueError("segments are keyed by artifact role")
        return self

    @property
    def unknown_fields(self) -> dict[str, Any]:
        """Top-level fields this package does not know (a newer minor's), exactly as written."""
        return dict(self.model_extra or {})


def missing_written_fields(record: CheckpointRecord) -> list[str]:
    """The :data:`WRITTEN_FIELDS` ``record`` lacks: empty for every record this package may commit."""
    missing = [n for n in WRITTEN_FIELDS if "." not in n and getattr(record, n) is None]
    if record.authority.execution_generation is None:
        missing.append("authority.execution_generation")
    return missing
