"""The ledger page: tasks, the Handoff outcomes panel and the pause switch, served by the control API.

A server-rendered HTML shell plus one small script and one stylesheet (no
front-end build). The page signs in with a bearer token kept in the tab's
``sessionStorage`` and reads ``GET /v1/swarms/{swarm}/ledger``; decisions and
the pause switch go through the control API's own routes. Register it on the
API's application with :func:`setup_ledger`.
"""

from __future__ import annotations

from .routes import setup_ledger
from .security import CSP, SECURITY_HEADERS
from .view import ledger_view

__all__ = ["CSP", "SECURITY_HEADERS", "ledger_view", "setup_ledger"]
