"""A loopback model API for the real Claude Code and Codex CLIs: scripted streamed replies; requests kept.

The server lives in the demo's :mod:`agentihooks_demo.model_api` (``make
evidence`` runs the real CLIs against it too); this module re-exports it under
the names the tests use. See that module for what it answers and records.
"""

from __future__ import annotations

from agentihooks_demo.model_api import (
    ATTEMPT_HEADER,
    HOLD,
    SIDE_REPLY,
    Event,
    Flood,
    Hold,
    ModelApi,
    RecordedRequest,
    Reply,
    ScriptEntry,
    ToolCall,
    overlaps,
)

__all__ = [
    "ATTEMPT_HEADER",
    "HOLD",
    "SIDE_REPLY",
    "Event",
    "Flood",
    "Hold",
    "ModelApi",
    "RecordedRequest",
    "Reply",
    "ScriptEntry",
    "ToolCall",
    "overlaps",
]
