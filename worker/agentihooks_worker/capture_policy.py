"""Which capture policy an attempt runs under, and the signal file, hooks and triggers that carry it out.

The Swarm's ``spec.capture`` reaches the worker in its launch record. The
worker's own settings are the defaults (continuous, a 1 s floor, the 300 s
periodic fallback) and any of them set in the Pod's environment wins over the
launch record (an operator's override through the Pod template). In
``continuous`` mode the worker makes a signal file for the harness's hooks
(0600, in the attempt's ``run`` folder), names it in the harness's environment
and merges the hooks into Claude Code's settings (:mod:`.hooks`); Codex's
``notify`` hook goes on its command line instead (``Harness.with_capture_hook``,
applied by the boot), so the user's ``config.toml`` is never edited.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agentihooks_checkpoint.launch import LaunchRecord

from .attempt import AttemptLayout
from .hooks import SIGNAL_ENV, add_capture_hooks
from .live_capture import LiveCapture
from .settings import WorkerSettings
from .triggers import CaptureTriggers

SIGNAL_NAME = "capture.signal"


@dataclass(frozen=True)
class CapturePolicyInUse:
    mode: Literal["continuous", "periodic"]
    floor: float
    interval: float
    progress_floor: float

    @property
    def continuous(self) -> bool:
        return self.mode == "continuous"


def policy_of(settings: WorkerSettings, launch: LaunchRecord) -> CapturePolicyInUse:
    """The launch record's policy over the settings' defaults; a setting from the environment wins."""
    explicit = settings.model_fields_set
    record = launch.capture
    mode = settings.capture_mode
    floor = settings.capture_floor_seconds
    interval = settings.capture_interval_seconds
    if record is not None:
        if "capture_mode" not in explicit:
            mode = record.mode
        if "capture_floor_seconds" not in explicit:
            floor = record.floor_seconds
        if "capture_interval_seconds" not in explicit:
            interval = record.interval_seconds
    return CapturePolicyInUse(mode, float(floor), float(interval), settings.progress_floor_seconds)


def signal_file(layout: AttemptLayout) -> Path:
    return layout.root / "run" / SIGNAL_NAME


def prepare(policy: CapturePolicyInUse, harness: str, layout: AttemptLayout, env: dict[str, str]) -> None:
    """The signal file and the harness's hooks (continuous mode only); ``env`` names the file."""
    if not policy.continuous:
        env.pop(SIGNAL_ENV, None)
        return
    path = signal_file(layout)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    os.close(fd)
    env[SIGNAL_ENV] = str(path)
    if harness == "claude":
        add_capture_hooks(layout.claude_config_dir / "settings.json")


def triggers_for(
    policy: CapturePolicyInUse, layout: AttemptLayout, hook: LiveCapture | None
) -> CaptureTriggers | None:
    """The supervisor's triggers (``None``: no capture while the harness runs)."""
    if hook is None or (policy.interval <= 0 and not policy.continuous):
        return None
    return CaptureTriggers(
        floor=policy.floor if policy.continuous else policy.interval,
        interval=policy.interval,
        continuous=policy.continuous,
        signal_file=signal_file(layout) if policy.continuous else None,
        watch=hook.signature if policy.continuous else None,
    )
