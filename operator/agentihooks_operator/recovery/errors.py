"""Errors of the recovery core.

Callers at the edge (kopf handlers, the control API, the CLI) translate these:
:class:`RecoveryRefused` carries the exact message a master or operator sees,
:class:`LeaseLost` means this controller no longer holds the swarm's lease and
changed nothing.
"""

from __future__ import annotations

from ..errors import OperatorError

#: Refusal messages shown to masters and operators (stable wire strings).
NO_CHECKPOINT = "no complete compatible checkpoint to resume from"
NOT_PENDING = "no recovery decision is pending for this attempt"
#: A relaunch asked for a seat whose current attempt did not report a refused restore.
NOT_REFUSED = "no refused restore to relaunch for this seat"
FORBIDDEN_SCOPE = "forbidden_scope"


class RecoveryError(OperatorError):
    """Base class of recovery-core errors."""


class RecoveryRefused(RecoveryError):
    """A request that the rules refuse; ``message`` is the exact text to show, ``reason`` a short code."""

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason or message


class NotDecidedYet(RecoveryRefused):
    """A choice for an attempt that is fenced but whose decision step has not run yet (another thread
    of this controller is between the two). Answered like any choice that finds nothing pending; a
    recorded request is kept for a later pass instead of being dropped."""


class LeaseLost(RecoveryError):
    """This controller does not hold the swarm's lease (or its epoch moved on); nothing was written."""


class StoreUnavailable(RecoveryError):
    """A write Redis did not answer or could not take for now (the connection lost, no primary named
    by Sentinel, a read-only replica after a failover, a timeout): its outcome is unknown, and the
    next pass (or the caller's retry) observes and replays it. A script error is not this."""


class InvalidInput(RecoveryError):
    """An argument that is not acceptable (bad id, unknown choice); nothing was written."""


class LaunchBlocked(RecoveryError):
    """The launcher cannot send an attempt's launch yet: something outside the operator is missing or
    refused (a credential Secret, the API server's admission of the Pod).

    Nothing was created that a retry would not reuse. ``message`` says what and how to fix it, never a
    credential's content; ``reason`` is a fixed word (``credential``, ``admission``). The launch step
    stays ``unknown`` and is sent again, with growing waits (:mod:`.steps.launchwait`), until it goes through.
    """

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason


class InjectedFault(RecoveryError):
    """Raised by a :class:`FaultInjector` at a named write point (tests and drills only)."""


class ResumeRefused(RecoveryError):
    """A resume of a held recovery that was refused; nothing was sent and the record is unchanged.

    ``code`` is the wire code (``checkpoint_not_found``, ``resume_token_invalid``, ``observed_invalid``,
    ``observed_required``, ``plan_changed``), ``status`` its HTTP status and ``steps`` names the steps
    concerned (never a token).
    """

    STATUS = {
        "checkpoint_not_found": 404,
        "resume_token_invalid": 403,
        "observed_invalid": 400,
        "observed_required": 400,
        "plan_changed": 409,
    }

    def __init__(self, code: str, message: str, steps: list[dict[str, object]] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.status = self.STATUS[code]
        self.message = message
        self.steps = steps or []
