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


class StoreUnreachable(StoreError):
    """The store (for a ``checkpoint_remote`` worker: the controller) did not answer in time.

    Says nothing about whether the object exists: a verification refuses ``store_unreachable``,
    never ``manifest_absent`` or ``missing_object``.
    """


class RecordRefused(CheckpointError):
    """A checkpoint record that cannot be accepted; ``reason`` is a :class:`~.reasons.Reason` value."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class CheckpointExists(StoreError):
    """A committed checkpoint with this id already exists in the scope; commits are write-once."""


class CaptureError(CheckpointError):
    """A checkpoint could not be captured; nothing was committed."""
