"""Harness adapters: one module per supported agent CLI behind one interface (``base.Harness``)."""

from __future__ import annotations

from .base import Harness, HarnessVersion, NativeSession
from .claude import ClaudeCode
from .codex import Codex

HARNESSES: dict[str, Harness] = {"claude": ClaudeCode(), "codex": Codex()}


def harness_for(name: str) -> Harness:
    """The adapter for a launch record's ``harness`` value."""
    try:
        return HARNESSES[name]
    except KeyError:
        raise ValueError(f"unknown harness {name!r}; supported: {', '.join(sorted(HARNESSES))}") from None


__all__ = ["HARNESSES", "ClaudeCode", "Codex", "Harness", "HarnessVersion", "NativeSession", "harness_for"]
