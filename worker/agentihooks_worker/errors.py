"""Errors of the worker package."""

from __future__ import annotations


class WorkerError(Exception):
    """Base class for worker errors."""
