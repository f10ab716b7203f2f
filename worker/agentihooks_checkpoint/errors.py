"""Errors of the checkpoint contract, one small hierarchy so callers can catch them at the edge."""

from __future__ import annotations


class CheckpointError(Exception):
    """Base class for every error raised by this package."""


class MalformedDirective(CheckpointError):
    """A restore directive whose fields disagree with each other."""


class StoreConfigError(CheckpointError):
    """A checkpoint store was configured in a way that cannot work (e.g. a relative root)."""


class StoreError(CheckpointError):
    """A store operation failed for a reason other than a missing object."""


class ObjectMissing(StoreError):
    """The store holds no object under the requested key."""
