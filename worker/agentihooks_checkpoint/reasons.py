"""Why a checkpoint is refused: the reason codes of the spec's refusal table.

Verification verdicts and worker refusals name exactly these strings; metrics
count refusals as ``refused/<reason>``. Keep the values stable: masters, logs
and dashboards match on them.
"""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    """A refusal reason; the value is the wire string."""

    MANIFEST_ABSENT = "manifest_absent"
    CORRUPT_MANIFEST = "corrupt_manifest"
    MISSING_OBJECT = "missing_object"
    CORRUPT_OBJECT = "corrupt_object"
    UNSUPPORTED_VERSION = "unsupported_version"
    INVALID_RECORD = "invalid_record"
    NOT_COMMITTED = "not_committed"
    MISSING_MATERIAL = "missing_material"
    MISSING_WATERMARK = "missing_watermark"
    INVENTORY_MISMATCH = "inventory_mismatch"
    SCOPE_MISMATCH = "scope_mismatch"
    IDENTITY_MISMATCH = "identity_mismatch"
    CONTEXT_ONLY = "context_only"
    CONVERSATION_MISMATCH = "conversation_mismatch"
    UNQUALIFIED_VERSION = "unqualified_version"
    VERSION_CHANGED = "version_changed"
    MALFORMED_DIRECTIVE = "malformed_directive"
    #: Added by this package (the spec's table has no reason for it): the store, or for a
    #: ``checkpoint_remote`` worker the controller, did not answer before the retry deadline. Says
    #: nothing about the checkpoint itself, unlike ``manifest_absent`` and ``missing_object``.
    STORE_UNREACHABLE = "store_unreachable"


#: The verdict reasons ``Validator.verify`` may return (a subset of :class:`Reason`).
VERIFY_REASONS: frozenset[Reason] = frozenset(
    {
        Reason.MANIFEST_ABSENT,
        Reason.CORRUPT_MANIFEST,
        Reason.MISSING_OBJECT,
        Reason.CORRUPT_OBJECT,
        Reason.UNSUPPORTED_VERSION,
        Reason.INVALID_RECORD,
        Reason.NOT_COMMITTED,
        Reason.MISSING_MATERIAL,
        Reason.MISSING_WATERMARK,
        Reason.INVENTORY_MISMATCH,
        Reason.SCOPE_MISMATCH,
        Reason.IDENTITY_MISMATCH,
        Reason.STORE_UNREACHABLE,
    }
)

#: Worker refusal when a directive names a checkpoint but no store is configured (spec wording).
NO_STORE_MESSAGE = "no checkpoint store is configured for this worker"

#: Prefix of a refusal raised while applying captured source to the worktree.
SOURCE_PREFIX = "source: "

#: The short tokens metrics label those two refusals with (a label value is a fixed word).
SOURCE_LABEL = "source"
NO_STORE_LABEL = "no_checkpoint_store"
#: The longest refusal reason accepted on the wire (``source: <what>`` included).
REASON_CAP = 240


def reason_token(reason: str) -> str:
    """The metric token of a refusal reason: the spec's ``source: …`` and no-store strings have a
    short one; every other reason is its own token."""
    if reason.startswith(SOURCE_PREFIX):
        return SOURCE_LABEL
    if reason == NO_STORE_MESSAGE:
        return NO_STORE_LABEL
    return reason
