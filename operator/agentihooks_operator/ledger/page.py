"""The page's HTML shell, rendered on the server from ``templates/ledger.html``.

Both pages (the swarm list and a swarm's ledger) share their sign-in parts:
``templates/_session.html`` (who is signed in, sign out) and
``templates/_signin.html`` (the token form) are put into each page here, and
``static/session.js`` keeps the token for both scripts.

Every value put into the template is HTML-escaped here; the shell holds no
data beyond the swarm name (checked against the swarm-name pattern first) and
the poll interval. Rows and cards are filled in by ``static/ledger.js`` with
``textContent`` only.
"""

from __future__ import annotations

import html
import re
from functools import cache
from importlib import resources
from string import Template

from agentihooks_checkpoint.scope import NAMESPACE

from .errors import bad_swarm_name, unknown_asset

SWARM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")
#: The only files served under ``/ledger/static/``: name → content type.
ASSETS = {
    "ledger.js": "text/javascript; charset=utf-8",
    "session.js": "text/javascript; charset=utf-8",
    "index.js": "text/javascript; charset=utf-8",
    "ledger.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}


def _read(name: str) -> str:
    return resources.files(__package__).joinpath("templates", name).read_text("utf-8")


@cache
def _template(name: str) -> Template:
    """``templates/<name>`` with the shared sign-in parts already in place."""
    parts = {"session": _read("_session.html").rstrip("\n"), "signin": _read("_signin.html").rstrip("\n")}
    return Template(Template(_read(name)).safe_substitute(parts))


@cache
def render_index() -> str:
    """The shell of ``/ledger/``, the list of swarms: no data at all (``static/index.js`` reads
    ``GET /v1/swarms`` with the signed-in token and fills the list with ``textContent`` only)."""
    return _template("index.html").substitute()


@cache
def asset(name: str) -> tuple[bytes, str]:
    """The bytes and content type of a shipped asset; any other name is a 404."""
    if name not in ASSETS:
        raise unknown_asset()
    return resources.files(__package__).joinpath("static", name).read_bytes(), ASSETS[name]


def render_page(swarm: str, poll_ms: int, namespace: str = "") -> str:
    """The shell for ``swarm`` (in ``namespace`` when given); a name that cannot be a swarm or a
    namespace is refused before it is echoed."""
    if not SWARM_NAME.fullmatch(swarm) or (namespace and not re.fullmatch(NAMESPACE, namespace)):
        raise bad_swarm_name()
    return _template("ledger.html").substitute(
        swarm=html.escape(swarm, quote=True),
        namespace=html.escape(namespace, quote=True),
        poll_ms=int(poll_ms),
    )
