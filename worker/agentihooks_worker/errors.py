"""Errors of the worker package.

A boot either refuses (the launch cannot deliver its directive: exit 64, with a
reason from the spec's table) or fails (something broke that is not the
checkpoint's fault: exit 70). Keeping the two apart is what lets the controller
tell "fix the checkpoint or the image" from "retry".
"""

from __future__ import annotations

from agentihooks_checkpoint.reasons import NO_STORE_LABEL, SOURCE_LABEL

EXIT_OK = 0
EXIT_REFUSED = 64
EXIT_FAILURE = 70
EXIT_INCOMPLETE_CHECKPOINT = 75
#: The worker stopped its agent because its lease ran out without a renewal (the controller was away or
#: cut off): the controller replaces the attempt, natively from its last capture where it can.
EXIT_LEASE_EXPIRED = 76
#: The controller answered that the attempt is fenced: its agent was stopped at once, nothing captured.
EXIT_FENCED = 77


class WorkerError(Exception):
    """Base class for worker errors; exits with :data:`EXIT_FAILURE`."""

    exit_code = EXIT_FAILURE


class Refused(WorkerError):
    """The launch is refused. ``reason`` is the metric token, ``message`` the full wire string.

    For the spec's reason codes both are the same (``context_only``); a source
    refusal has the token ``source`` and the message ``source: <what>``; the
    missing store has the token ``no_checkpoint_store`` and the spec's message.
    What a person reads (the ``restore_refused`` line's ``reason``, the refusal the
    controller records and answers with) is :attr:`spec_reason`: the spec's string.
    """

    exit_code = EXIT_REFUSED

    def __init__(self, reason: str, message: str | None = None, *, detail: str = "") -> None:
        self.reason = reason
        self.message = message if message is not None else reason
        #: A short explanation for the log; never record values, paths or conversation content.
        self.detail = detail
        #: Set once the refusal was counted in ``Restorer.metrics``.
        self.counted = False
        super().__init__(self.message)

    @property
    def spec_reason(self) -> str:
        """The reason as the spec's refusal table writes it (``source: …``, the no-store sentence)."""
        if self.reason in (SOURCE_LABEL, NO_STORE_LABEL):
            return self.message
        return self.reason


class LaunchRecordError(Refused):
    """The launch record is missing or does not parse."""

    def __init__(self, message: str) -> None:
        super().__init__("invalid_launch_record", message)


class HarnessError(WorkerError):
    """A harness could not be asked something (its version, its files)."""


class StoreSelectionError(Refused):
    """The checkpoint store settings cannot work (for example a relative root)."""

    def __init__(self, message: str) -> None:
        super().__init__("store_config", message)
