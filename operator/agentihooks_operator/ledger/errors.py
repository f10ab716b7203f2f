"""Errors of the ledger page, turned into HTTP answers by the control API's error middleware."""

from __future__ import annotations

from ..api.errors import HttpProblem


def unknown_asset() -> HttpProblem:
    """A static file the page does not ship (only a fixed list is ever served); the name is not echoed."""
    return HttpProblem(404, "unknown_asset", "no such ledger asset: the page ships a fixed list of files")


def bad_swarm_name() -> HttpProblem:
    """The path's swarm segment cannot be a swarm name; the value is not echoed back."""
    return HttpProblem(
        400,
        "invalid_swarm",
        "the swarm name in the path is not valid: it starts with a letter or digit and holds "
        "letters, digits and . _ @ - only, at most 128 characters",
    )
