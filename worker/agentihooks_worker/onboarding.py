"""Mark Claude Code's first-run onboarding done and the worktree trusted before the harness starts.

A Pod has nobody to click through the welcome screens, and a harness stuck on
them never reaches its first turn, so it never writes a transcript a later
checkpoint could capture. The settings are merged into an existing
``.claude.json``; nothing else in it changes, and a file that is not a JSON
object is refused rather than replaced.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from .errors import WorkerError


class OnboardingError(WorkerError):
    """``.claude.json`` exists but cannot be merged into."""


def mark_onboarded(config_file: Path, cwd: Path) -> dict[str, Any]:
    """Set ``hasCompletedOnboarding`` and the worktree's ``hasTrustDialogAccepted``; return the result."""
    data, mode = load_object(config_file, OnboardingError)
    projects = data.get("projects")
    if projects is None:
        projects = data["projects"] = {}
    if not isinstance(projects, dict):
        raise OnboardingError(f"{config_file.name}: 'projects' is not an object; leaving it as it is")
    key = str(cwd.absolute())
    project = projects.get(key)
    if project is None:
        project = projects[key] = {}
    if not isinstance(project, dict):
        raise OnboardingError(f"{config_file.name}: the project entry is not an object; leaving it as it is")
    data["hasCompletedOnboarding"] = True
    project["hasTrustDialogAccepted"] = True
    _atomic_write(config_file, json.dumps(data, indent=2).encode() + b"\n", mode)
    return data


def load_object(path: Path, error: type[WorkerError]) -> tuple[dict[str, Any], int]:
    """A harness settings file's JSON object and mode (absent: empty, 0600); ``error`` when the file is
    not a JSON object (it is then left as it is)."""
    if not path.exists():
        return {}, 0o600
    try:
        loaded = json.loads(path.read_bytes())
    except ValueError as e:
        raise error(f"{path.name} is not JSON; leaving it as it is") from e
    if not isinstance(loaded, dict):
        raise error(f"{path.name} does not hold a JSON object; leaving it as it is")
    return loaded, path.stat().st_mode & 0o777


def _atomic_write(path: Path, data: bytes, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
