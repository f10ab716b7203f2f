"""HTTP problems of the control API: one exception type that the error middleware turns into JSON.

Every refusal has a stable ``error`` code and a ``message``; neither ever
carries a credential, a token digest or conversation content.
"""

from __future__ import annotations

from ..errors import OperatorError

FORBIDDEN_SCOPE = "forbidden_scope"


class HttpProblem(OperatorError):
    """An answer other than success: ``status``, a short ``code`` and a human ``message``."""

    def __init__(
        self, status: int, code: str, message: str | None = None, *, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message or code)
        self.status = status
        self.code = code
        self.message = message or code
        self.headers = headers or {}

    def body(self) -> dict[str, str]:
        return {"error": self.code, "message": self.message}


def forbidden() -> HttpProblem:
    """The one answer for a caller whose credential does not grant the action."""
    return HttpProblem(403, FORBIDDEN_SCOPE, FORBIDDEN_SCOPE)


#: The error code a fenced attempt's worker is answered with, on every worker route.
FENCED = "fenced"


def fenced(message: str) -> HttpProblem:
    """A worker calling with the credential its attempt's fence revoked (or renewing a fenced
    attempt): never a bare 403, so the worker knows to stop its agent at once."""
    return HttpProblem(410, FENCED, message)


def not_published() -> HttpProblem:
    """The execution exists (a worker's live credential, or an attempt a decision names) but its swarm
    is not served here yet: a replica that has just started. The caller retries."""
    return HttpProblem(
        503,
        "swarm_not_published",
        "this execution's swarm is not served by the control API yet; retry shortly",
        headers={"Retry-After": "1"},
    )


def bad_request(message: str, code: str = "invalid_request") -> HttpProblem:
    return HttpProblem(400, code, message)


def not_found(message: str, code: str = "not_found") -> HttpProblem:
    return HttpProblem(404, code, message)


#: Refusals that concern a name in the path. They say which part of the path is wrong, never what
#: it held: error messages do not echo a caller's input.
def unknown_swarm() -> HttpProblem:
    return not_found("unknown swarm: the swarm named in the path is not served here", "unknown_swarm")


def unknown_seat() -> HttpProblem:
    return not_found("unknown seat: the swarm has no seat of the name in the path", "unknown_seat")


def unknown_execution() -> HttpProblem:
    return not_found("unknown execution: no attempt has the execution id in the path", "unknown_execution")


def invalid_execution() -> HttpProblem:
    return bad_request(
        "the execution in the path is not an execution id (expected exe-<32 hex>)", "invalid_execution"
    )


def not_leader() -> HttpProblem:
    """This replica does not hold the swarm's lease; the caller retries (or another replica answers)."""
    return HttpProblem(
        503,
        "not_leader",
        "this controller replica does not hold the swarm's lease; retry shortly",
        headers={"Retry-After": "2"},
    )
