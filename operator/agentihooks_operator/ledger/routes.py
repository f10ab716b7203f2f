"""Routes of the ledger page and :func:`setup_ledger`, the one call the control API's factory makes.

``GET /ledger/`` serves the index shell (the swarms the signed-in caller may
see, read from ``GET /v1/swarms``), ``GET /ledger/{namespace}/{swarm}`` (or
``/ledger/{swarm}`` while one namespace holds the name) a swarm's shell (no
credential: neither carries data), ``GET /ledger/static/{name}`` its script and
stylesheet, and ``GET /v1/namespaces/{namespace}/swarms/{swarm}/ledger`` (or
``/v1/swarms/{swarm}/ledger``) the data, for the operator and the swarm's
registered masters only (anyone else: 403 ``forbidden_scope``).
"""

from __future__ import annotations

from aiohttp import web

from ..api.common import answer, blocking, named_swarm, operator_or_master, state_of
from .config import LedgerConfig
from .page import asset, render_index, render_page
from .security import add_security_headers
from .view import ledger_view

POLL_MS: web.AppKey[int] = web.AppKey("ledger_poll_ms", int)


async def page(request: web.Request) -> web.Response:
    text = render_page(
        request.match_info["swarm"], request.app[POLL_MS], request.match_info.get("namespace", "")
    )
    return web.Response(text=text, content_type="text/html", charset="utf-8")


async def index(request: web.Request) -> web.Response:
    return web.Response(text=render_index(), content_type="text/html", charset="utf-8")


async def static(request: web.Request) -> web.Response:
    body, content_type = asset(request.match_info["name"])
    return web.Response(body=body, headers={"Content-Type": content_type})


async def data(request: web.Request) -> web.Response:
    state = state_of(request)
    entry = state.entry(*named_swarm(request))
    caller = operator_or_master(request, entry)
    return answer(await blocking(ledger_view, state, entry, caller))


def setup_ledger(app: web.Application, config: LedgerConfig | None = None) -> None:
    """Add the ledger page, its assets and its data route to the control API's ``app``."""
    cfg = config or LedgerConfig()
    app[POLL_MS] = round(cfg.poll_seconds * 1000)
    app.router.add_get("/ledger/static/{name}", static)
    app.router.add_get("/ledger/", index)
    app.router.add_get("/ledger", index)
    app.router.add_get("/ledger/{swarm}", page)
    app.router.add_get("/v1/swarms/{swarm}/ledger", data)
    app.router.add_get("/ledger/{namespace}/{swarm}", page)
    app.router.add_get("/v1/namespaces/{namespace}/swarms/{swarm}/ledger", data)
    app.on_response_prepare.append(add_security_headers)
