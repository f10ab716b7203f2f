"""Errors of the Kubernetes layer; handlers translate them into kopf errors at the edge."""

from __future__ import annotations

from ..errors import OperatorError


class ApiError(OperatorError):
    """The API server refused a call (``status`` 0: it could not be reached).

    ``reason`` is the Status reason (``Forbidden``, ``AlreadyExists``...) or the
    HTTP phrase; ``message`` the API server's own explanation (for a 403 it
    names the verb, the resource and the namespace), empty when it gave none.
    """

    def __init__(self, status: int, method: str, path: str, reason: str, message: str = "") -> None:
        text = f"{method} {path} failed: {status} {reason}"
        super().__init__(f"{text}: {message}" if message else text)
        self.status = status
        self.method = method
        self.path = path
        self.reason = reason
        self.message = message


class NoCredentials(OperatorError):
    """Neither a service account (in a Pod) nor a usable kubeconfig was found."""


class InvalidSwarm(OperatorError):
    """The Swarm's spec does not validate; the message names every wrong field."""
