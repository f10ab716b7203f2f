"""``agentihooks-operator --check-install``: what ``helm test`` runs to prove an install works.

The chart's test Pod (templates/tests/check-install.yaml) runs this in the operator image with the
operator's ServiceAccount and Redis settings, from a Pod of its own, so each check goes the way a
client's request does:

1. the operator is ready, asked through its Service (``/readyz`` on the control API: kopf runs and
   Redis answers the operator);
2. the control API answers through that Service (its OpenAPI document, whose version is printed);
3. Redis is reachable with the operator's settings, and, when a password is set, refuses a client
   without it (authentication is on, not merely configured);
4. the Swarm CRD is served and the operator's account may list Swarms in a watched namespace.

One line per check (``ok: ...`` or ``FAILED: <part>: <why>``), never a credential; exit 1 when any
check failed, so ``helm test`` fails naming the broken part.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

log = logging.getLogger("agentihooks_operator.selftest")

Check = tuple[str, Callable[[], str]]


def _operator_ready(url: str) -> str:
    import httpx

    r = httpx.get(f"{url}/readyz", timeout=10)
    if r.status_code != 200:
        raise RuntimeError(f"/readyz answered {r.status_code}: {r.text[:200]}")
    return "the operator is ready (kopf runs, Redis answers it)"


def _api_answers(url: str) -> str:
    import httpx

    r = httpx.get(f"{url}/v1/openapi.json", timeout=10)
    if r.status_code != 200:
        raise RuntimeError(f"/v1/openapi.json answered {r.status_code}")
    return f"the control API answers through its Service ({url}, version {r.json()['info']['version']})"


def _redis_authenticated() -> str:
    import redis

    from .k8s.config import OperatorConfig, connect_redis
    from .redisconn import connect

    config = OperatorConfig()
    client = connect_redis(config)
    try:
        client.ping()
    finally:
        client.close()
    if config.redis_password is None or not config.redis_password.get_secret_value():
        return "Redis answers (no password is configured)"
    anonymous = connect(config.redis_url, None, ca_file=config.redis_ca_file or None)
    try:
        anonymous.ping()
    except redis.AuthenticationError:
        return "Redis answers with the operator's password and refuses a client without it"
    except redis.ResponseError as e:  # NOAUTH on older servers
        if "NOAUTH" in str(e) or "auth" in str(e).lower():
            return "Redis answers with the operator's password and refuses a client without it"
        raise
    finally:
        anonymous.close()
    raise RuntimeError("Redis answered a client without the password: authentication is off")


def _crd_served() -> str:
    from .k8s.client import KubeClient
    from .k8s.config import OperatorConfig

    namespaces = OperatorConfig().namespace_list
    kube = KubeClient.from_environment(agent="agentihooks-operator/check-install")
    try:
        where = namespaces[0] if namespaces else None
        swarms = kube.list("agentihooks.io/v1alpha1/swarms", where)
    finally:
        kube.close()
    return f"the Swarm CRD is served: {len(swarms)} Swarm(s) in {where or 'all namespaces'}"


def checks(control_url: str) -> list[Check]:
    url = control_url.rstrip("/")
    return [
        ("operator", lambda: _operator_ready(url)),
        ("control API", lambda: _api_answers(url)),
        ("Redis", _redis_authenticated),
        ("CRD", _crd_served),
    ]


def run(control_url: str, out: Callable[[str], None] = print) -> int:
    """Every check, in order; the exit status (0 when all passed)."""
    failed = 0
    for part, check in checks(control_url):
        try:
            out(f"ok: {check()}")
        except Exception as e:  # every failure is reported the same way, naming the part
            failed += 1
            out(f"FAILED: {part}: {type(e).__name__}: {str(e)[:300]}")
    out("the install works" if not failed else f"{failed} check(s) failed")
    return 1 if failed else 0
