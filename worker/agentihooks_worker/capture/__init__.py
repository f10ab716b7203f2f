"""Capture a checkpoint from a harness home, a worktree and the transcript (library and command)."""

from __future__ import annotations

from .build import CaptureResult, capture
from .request import CaptureRequest

__all__ = ["CaptureRequest", "CaptureResult", "capture"]
