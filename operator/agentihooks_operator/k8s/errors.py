"""Errors of the Kubernetes layer; handlers translate them into kopf errors at the edge."""

from __future__ import annotations

from ..errors import OperatorError


class ApiError(OperatorError):
    """The API server refused a call (``status`` 0: it could not be reached).

    ``reason`` is the Status reason (``Forbidden``, ``AlreadyExists``...) or the
    HTTP phrase; ``message`` the API server's own explanation (for a 403 it
    names the verb, the resource and the namespace), empty when it gave none.

    ``maybe_applied`` is False only when no send of the call can have taken effect: every try
    failed before a connection was made, or was throttled (429). A create that fails that way
    certainly created nothing, which a launch may act on; any other failure may have.
    """

    def __init__(
        self,
        status: int,
        method: str,
        path: str,
        reason: str,
        message: str = "",
        *,
        maybe_applied: bool = True,
    ) -> None:
        text = f"{method} {path} failed: {status} {reason}"
        super().__init__(f"{text}: {message}" if message else text)
        self.status = status
        self.method = method
        self.path = path
        self.reason = reason
        self.message = message
        self.maybe_applied = maybe_applied


class AccessDenied(ApiError):
    """Calls of a recovery pass that the operator's RBAC refused (403), each named in the message.

    The recovery core keeps going when one attempt's step fails (the next pass
    retries it), so a refused create or delete would otherwise only show as a
    logged step failure. The pass raises this once it has published what it
    did; the handler turns it into a ``kopf.TemporaryError`` (logged, posted as
    an Event on the Swarm, retried after a delay), never an exit.
    """

    def __init__(self, summary: str, refused: list[ApiError]) -> None:
        first = refused[0]
        super().__init__(403, first.method, first.path, "Forbidden", summary)
        self.summary = summary
        self.refused = refused

    def __str__(self) -> str:
        return self.summary


class NoCredentials(OperatorError):
    """Neither a service account (in a Pod) nor a usable kubeconfig was found."""


class InvalidSwarm(OperatorError):
    """The Swarm's spec does not validate; the message names every wrong field."""
