"""Errors of the Kubernetes layer; handlers translate them into kopf errors at the edge."""

from __future__ import annotations

from ..errors import OperatorError


class ApiError(OperatorError):
    """The API server refused a call (``status`` 0: it could not be reached)."""

    def __init__(self, status: int, method: str, path: str, reason: str) -> None:
        super().__init__(f"{method} {path} failed: {status} {reason}")
        self.status = status
        self.method = method
        self.path = path
        self.reason = reason


class InvalidSwarm(OperatorError):
    """The Swarm's spec does not validate; the message names every wrong field."""
