"""The worker's settings, read from its environment once at boot.

Everything the entrypoint needs from outside the launch record lives here, so
tests build a ``WorkerSettings`` directly instead of patching ``os.environ``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from agentihooks_checkpoint.archive import MAX_EXPANDED, MAX_MEMBERS, ArchiveLimits
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_ATTEMPTS_DIR = Path("/home/worker/attempts")
DEFAULT_LAUNCH_RECORD = Path("/var/run/swarm/launch/launch.json")


class WorkerSettings(BaseSettings):
    """``AGENTIHOOKS_*`` environment of a worker Pod."""

    model_config = SettingsConfigDict(env_prefix="AGENTIHOOKS_", extra="ignore", frozen=True)

    #: Object storage bucket; wins over ``checkpoint_root`` when both are set.
    checkpoint_bucket: str | None = None
    #: Absolute path of a local checkpoint folder.
    checkpoint_root: str | None = None
    #: Set by the worker itself when its launch record says ``checkpoint_remote: true``.
    checkpoint_remote: bool = False
    #: S3 endpoint override (tests point it at a local S3 API); boto3's own variables work too.
    checkpoint_endpoint: str | None = None
    #: Key prefix inside the bucket.
    checkpoint_prefix: str = ""
    #: Where to clone a project from when the worktree has no repository, by project id
    #: (JSON object). ``github.com/<owner>/<repo>`` defaults to its https URL.
    project_remotes: dict[str, str] = Field(default_factory=dict)
    #: Where attempt folders are made (``/home/worker/attempts`` in the image).
    attempts_dir: Path = DEFAULT_ATTEMPTS_DIR
    #: The launch record file.
    launch_record: Path = DEFAULT_LAUNCH_RECORD
    #: Seconds between periodic captures while the harness runs; 0 turns them off. In ``continuous``
    #: mode the periodic capture is the fallback for what no event announced.
    capture_interval_seconds: float = Field(default=300.0, ge=0)
    #: ``continuous``: capture on the agent's own events as well (hooks, session files changing);
    #: ``periodic``: on the timer only. A launch record's ``capture`` (the Swarm's ``spec.capture``)
    #: wins over the defaults; a variable set in the Pod's environment wins over the launch record.
    capture_mode: Literal["continuous", "periodic"] = "continuous"
    #: The shortest time between two captures (a burst of events is one capture).
    capture_floor_seconds: float = Field(default=1.0, ge=0.05, le=60)
    #: The shortest time between two progress reports to the controller (a held-back one follows).
    progress_floor_seconds: float = Field(default=2.0, ge=0, le=60)
    #: Where the Pod mounts the provider credential's files (set by the operator when there are any).
    provider_files: Path | None = None
    #: How long one call to the controller (store reads and uploads, the outcome report, heartbeats)
    #: keeps retrying connection errors, timeouts and 502/503/504 answers: long enough to ride out an
    #: operator restart or a rolling update.
    control_retry_seconds: float = Field(default=120.0, ge=0)
    #: Most members (files and folders) one checkpoint archive may hold.
    archive_max_members: int = Field(default=MAX_MEMBERS, ge=1)
    #: Most bytes one checkpoint archive may expand to (it may never pass the archive's own size either).
    archive_max_expanded_bytes: int = Field(default=MAX_EXPANDED, ge=1)

    @property
    def archive_limits(self) -> ArchiveLimits:
        return ArchiveLimits(self.archive_max_members, self.archive_max_expanded_bytes)
