"""Shell completion of swarm and seat names, asked of the control API the command would talk to.

``agentihooks swarm <TAB>`` offers the swarms the token may see (``GET
/v1/swarms``, in the namespace ``-n`` names when given), ``agentihooks swarm
NAME restore-decision <TAB>`` (and ``relaunch``, ``checkpoints``) the Swarm's
seats (its status). The URL and token come from the same options and
variables as the command's. Completion never prints an error and never waits
long: an API that cannot be reached, refuses, or answers slowly offers nothing.
"""

from __future__ import annotations

import os
from typing import Any

from . import namespace, reach
from .client import CliError, ControlClient

#: Seconds a completion may wait for the control API (the shell waits for it).
TIMEOUT_S = 2.0


def _options(ctx: Any) -> dict[str, Any]:
    """The options parsed so far, the root's first, nearer contexts' over them (-n given twice)."""
    chain = []
    while ctx is not None:
        chain.append(ctx)
        ctx = ctx.parent
    merged: dict[str, Any] = {}
    for c in reversed(chain):
        merged.update({k: v for k, v in (c.params or {}).items() if v is not None})
    return merged


def _client(opts: dict[str, Any]) -> ControlClient:
    obj = {
        "url": opts.get("control_url") or os.environ.get("AGENTIHOOKS_CONTROL_URL"),
        "token": opts.get("token") or os.environ.get("AGENTIHOOKS_TOKEN"),
        "ca_file": opts.get("ca_file") or os.environ.get("AGENTIHOOKS_CA_FILE"),
        "operator_namespace": opts.get("operator_namespace"),
        "context": opts.get("context"),
    }
    return reach.control_client(obj, timeout=TIMEOUT_S)


def _ask(ctx: Any, path_of: Any) -> Any:
    opts = _options(ctx)
    try:
        c = _client(opts)
        try:
            return c.call("GET", path_of(opts)).body
        finally:
            c.close()
    except (CliError, KeyError, ValueError):  # completion offers nothing rather than an error
        return None


def swarms(ctx: Any, incomplete: str) -> list[str]:
    body = _ask(ctx, lambda _: "/v1/swarms") or {}
    wanted = _options(ctx).get("ns") or _options(ctx).get("namespace")
    names = {
        str(s.get("swarm"))
        for s in body.get("swarms", [])
        if s.get("swarm") and (not wanted or s.get("namespace") == wanted)
    }
    return sorted(n for n in names if n.startswith(incomplete))


def seats(ctx: Any, incomplete: str) -> list[str]:
    def path(opts: dict[str, Any]) -> str:
        ns = namespace.resolve(opts.get("ns") or opts.get("namespace"))
        return namespace.swarm_path(str(opts["name"]), ns) + "/status"

    body = _ask(ctx, path) or {}
    names = {str(s.get("seat")) for s in body.get("seats", []) if s.get("seat")}
    return sorted(n for n in names if n.startswith(incomplete))
