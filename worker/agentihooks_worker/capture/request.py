"""What a capture needs to know, validated at the edge."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from agentihooks_checkpoint.model import COMMIT, IDENTIFIER, PROJECT_ID
from agentihooks_checkpoint.scope import StoreScope
from pydantic import BaseModel, ConfigDict, Field


class CaptureRequest(BaseModel):
    """Inputs of one capture. Paths are absolute; native files are relative to ``harness_home``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scope: StoreScope
    checkpoint_id: str = Field(pattern=IDENTIFIER)
    checkpoint_sequence: int = Field(ge=0)
    execution_id: str = Field(pattern=IDENTIFIER)
    execution_generation: int = Field(ge=1)
    project_id: str = Field(pattern=PROJECT_ID)
    harness: Literal["claude", "codex"]
    compatibility_key: str = Field(min_length=1, max_length=255)
    transcript: Path
    #: ``transcript_durable_cursor.sequence``: the last archived transcript record.
    watermark: int = Field(ge=0)
    #: Byte offset of the cursor; defaults to the transcript's size.
    transcript_byte_offset: int | None = Field(default=None, ge=0)
    worktree: Path
    #: Defaults to HEAD (nothing committed since the task started: no bundle).
    base_commit: str | None = Field(default=None, pattern=COMMIT)
    #: Defaults to the worktree's current branch.
    branch_name: str | None = Field(default=None, min_length=1, max_length=255)
    harness_home: Path | None = None
    native_files: list[str] = Field(default_factory=list)
    native_session_id: str | None = Field(default=None, pattern=IDENTIFIER)
    native_harness_version: str | None = Field(default=None, min_length=1, max_length=64)
    quiescence_method: Literal[
        "harness_snapshot", "stopped_process", "consistent_export", "partial_capture"
    ] = "stopped_process"
    operation_id: str | None = Field(default=None, pattern=IDENTIFIER)
    seat_id: str | None = Field(default=None, pattern=IDENTIFIER)
    controller_epoch: int | None = Field(default=None, ge=0)
    exclusions: list[str] = Field(default_factory=list)
    restore_constraints: list[str] = Field(default_factory=list)
