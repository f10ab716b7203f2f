"""The checkpoint record: the swarm v2 checkpoint manifest, major 2, as a pydantic model.

Every known minor of major 2 parses. 2.0 is the oldest shape; 2.1 adds the
quiescence method, the dependencies manifest, the restore constraints and the
two native fields; 2.2 (written by this package) adds the attempt's own
execution generation, the compatibility key, the harness name and the
artifact inventory. A later minor of major 2 is read with the 2.2 rules; its
extra fields are kept. ``docs/swarm-v2/schemas/checkpoint.json`` says the same
thing as JSON Schema, and the tests hold the two together.
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
PROJECT_ID = r"^(github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+|local:[A-Za-z0-9][A-Za-z0-9._-]*|unknown)$"
SCHEMA_VERSION = r"^2\.(0|[1-9][0-9]*)$"
ROLE = r"^[a-z][a-z0-9_]{0,63}$"
#: A relative artifact path: segments never start with a dot, so no ``..``, no absolute path.
RELATIVE_PATH = (
    r"^[A-Za-z0-9_@+=,-][A-Za-z0-9._@+=,-]{0,127}(/[A-Za-z0-9_@+=,-][A-Za-z0-9._@+=,-]{0,127}){0,15}$"
)

#: The minor this package writes.
WRITTEN_VERSION = "2.2"
KNOWN_MINORS = (0, 1, 2)

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
    """``transcript_durable_cursor``: how far the transcript was durably archived."""

    model_config = ConfigDict(strict=True, frozen=True, extra="allow")

    sequence: int | None = Field(default=None, ge=0)
    byte_offset: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _nulls(self) -> Cursor:
        _no_explicit_null(self)
        return self


class ArtifactEntry(BaseModel):
    """One inventory row: role, relative path it is staged under, exact size and digest."""

    model_config = _STRICT

    role: str = Field(pattern=ROLE)
    path: str = Field(pattern=RELATIVE_PATH)
    size: int = Field(ge=0)
    digest: str = Field(pattern=DIGEST)


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
    artifact_hashes: dict[str, str]
    exclusions: list[str]
    # -- minor 1 --
    quiescence_method: (
        Literal["harness_snapshot", "stopped_process", "consistent_export", "partial_capture"] | None
    ) = None
    dependencies_manifest: dict[str, Any] | None = None
    restore_constraints: list[str] | None = None
    native_harness_version: str | None = Field(default=None, min_length=1, max_length=64)
    native_session_id: str | None = Field(default=None, pattern=IDENTIFIER)
    # -- minor 2 (this package) --
    compatibility_key: str | None = Field(default=None, min_length=1, max_length=255)
    harness: Literal["claude", "codex"] | None = None
    artifacts: list[ArtifactEntry] | None = None

    @property
    def minor(self) -> int:
        return int(self.schema_version.split(".", 1)[1])

    @property
    def watermark(self) -> int | None:
        c = self.transcript_durable_cursor
        return None if c is None else c.sequence

    @property
    def committed(self) -> bool:
        return self.status == "complete" and self.committed_at is not None

    @property
    def native(self) -> bool:
        return self.native_resume_capability == "qualified" and Role.NATIVE_SESSION in self.artifact_hashes

    @model_validator(mode="after")
    def _minor_rules(self) -> CheckpointRecord:
        _no_explicit_null(self)
        extra = set(self.model_extra or {})
        if extra & AUTHORITY_NAMES:
            raise ValueError("authority names belong inside authority")
        for role, digest in self.artifact_hashes.items():
            if (
                not re.fullmatch(ROLE, role)
                or not isinstance(digest, str)
                or not re.fullmatch(DIGEST, digest)
            ):
                raise ValueError("artifact_hashes maps roles to sha256 digests")
        if not all(isinstance(x, str) for x in self.exclusions):
            raise ValueError("exclusions are strings")
        if self.minor >= 1:
            for name in ("quiescence_method", "dependencies_manifest", "restore_constraints"):
                if getattr(self, name) is None:
                    raise ValueError(f"{name} is required from minor 1")
        if self.minor >= 2:
            missing = [n for n in ("compatibility_key", "harness", "artifacts") if getattr(self, n) is None]
            if self.authority.execution_generation is None:
                missing.append("authority.execution_generation")
            if missing:
                raise ValueError(f"required from minor 2: {', '.join(missing)}")
        return self
