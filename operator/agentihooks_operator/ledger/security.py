"""Response headers every ledger answer carries: a strict Content-Security-Policy and friends.

The policy allows only this origin's own script and stylesheet files: no inline
script or style, no plugins, no framing and no ``<base>`` rewriting. The hook
is attached to the application's response-prepare signal so error answers on
ledger paths carry the headers too.
"""

from __future__ import annotations

import re

from aiohttp import web

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cache-Control": "no-store",
}
#: Paths whose answers get the headers: the page, its assets and its data route.
LEDGER_PREFIX = "/ledger"
_DATA_ROUTE = re.compile(r"^/v1/swarms/[^/]+/ledger$")


def is_ledger_path(path: str) -> bool:
    return path == LEDGER_PREFIX or path.startswith(LEDGER_PREFIX + "/") or bool(_DATA_ROUTE.match(path))


async def add_security_headers(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare`` hook: set the headers on every ledger answer, errors included."""
    if is_ledger_path(request.path):
        for name, value in SECURITY_HEADERS.items():
            response.headers[name] = value
