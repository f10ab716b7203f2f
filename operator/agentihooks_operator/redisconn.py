"""One way to reach Redis, whatever runs it: a single server, a Redis Cluster, or Sentinel.

The operator, its control API and the CLI all connect through :func:`connect`,
so one setting, ``AGENTIHOOKS_REDIS_URL``, says where Redis is; its scheme says
how it runs:

* ``redis://host:port/db`` (``rediss://``, ``unix://``): one server (or a
  Sentinel-less primary).
* ``redis+cluster://host:port[,host:port...]`` (``rediss+cluster://``): a Redis
  Cluster; any reachable node seeds the topology, MOVED and ASK are followed.
  Every key of a swarm carries the ``{swarm}`` hash tag, so each script and
  pipeline touches one slot.
* ``redis+sentinel://host:port[,host:port...]/master-name[/db]``
  (``rediss+sentinel://``): the primary Sentinel names for ``master-name``,
  asked again after a failover.

The password (``AGENTIHOOKS_REDIS_PASSWORD``, or one written in the URL) is the
data nodes'; Sentinels that need their own take
``AGENTIHOOKS_REDIS_SENTINEL_PASSWORD``. A :class:`~.recovery.store.durable.Durability`
(``AGENTIHOOKS_REDIS_WAIT_REPLICAS``) is attached to the client returned.

Over TLS (``rediss://`` and its Cluster and Sentinel forms) the server's
certificate is verified against the system's CAs, or against the bundle in
``AGENTIHOOKS_REDIS_CA_FILE`` (a private CA); a bundle that cannot be read, or
one given for a URL without TLS, is refused before any connection is made.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, cast
from urllib.parse import unquote

import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.sentinel import Sentinel

from .recovery.store.durable import Durability, attach

Mode = Literal["standalone", "cluster", "sentinel"]
URL_SETTING = "AGENTIHOOKS_REDIS_URL"
_SCHEMES: dict[str, tuple[Mode, bool]] = {
    "redis+cluster": ("cluster", False),
    "rediss+cluster": ("cluster", True),
    "redis+sentinel": ("sentinel", False),
    "rediss+sentinel": ("sentinel", True),
}


@dataclass(frozen=True)
class RedisTarget:
    """A parsed ``redis+cluster://`` or ``redis+sentinel://`` URL (standalone URLs stay as given)."""

    mode: Mode
    url: str
    nodes: tuple[tuple[str, int], ...] = ()
    master: str | None = None
    db: int = 0
    tls: bool = False
    username: str | None = None
    password: str | None = None


def _bad(url: str, why: str) -> ValueError:
    shown = url.split("@", 1)[-1] if "@" in url else url  # never echo a password
    return ValueError(f"{URL_SETTING}: {why} (got {shown!r})")


def parse(url: str) -> RedisTarget:
    """Where and how to connect; a :class:`ValueError` naming ``AGENTIHOOKS_REDIS_URL`` if unusable."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise _bad(
            url, "not a URL: expected redis://, rediss://, unix://, redis+cluster:// or redis+sentinel://"
        )
    if scheme in ("redis", "rediss", "unix"):
        return RedisTarget("standalone", url)
    if scheme not in _SCHEMES:
        raise _bad(url, f"unknown scheme {scheme!r}")
    mode, tls = _SCHEMES[scheme]
    netloc, _, path = rest.partition("/")
    username = password = None
    if "@" in netloc:
        userinfo, netloc = netloc.rsplit("@", 1)
        user, has_pw, pw = userinfo.partition(":")
        username, password = unquote(user) or None, unquote(pw) if has_pw else None
    nodes = tuple(_node(url, n) for n in netloc.split(",") if n.strip())
    if not nodes:
        raise _bad(url, "names no host:port")
    parts = [p for p in path.split("/") if p]
    master: str | None = None
    if mode == "sentinel":
        if not parts:
            raise _bad(url, "a Sentinel URL ends with the master's name: redis+sentinel://h:26379/mymaster")
        master, parts = unquote(parts[0]), parts[1:]
    if len(parts) > 1 or (parts and not parts[0].isdigit()):
        raise _bad(url, "the path after the host list may only be a database number")
    db = int(parts[0]) if parts else 0
    if mode == "cluster" and db != 0:
        raise _bad(url, "a Redis Cluster has only database 0")
    return RedisTarget(mode, url, nodes, master, db, tls, username, password)


def _node(url: str, text: str) -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise _bad(url, f"{text.strip()!r} is not host:port")
    return host.strip("[]"), int(port)


def connect(
    url: str,
    password: str | None = None,
    *,
    sentinel_password: str | None = None,
    durability: Durability | None = None,
    socket_timeout: float = 10,
    ca_file: str | None = None,
) -> redis.Redis:
    """A client for ``url`` (see the module docstring); ``password`` overrides the URL's.

    A Redis Cluster client is returned typed as :class:`redis.Redis`: it offers the commands,
    scripts and pipelines this package uses under the same names (the one place the types meet).
    """
    target = parse(url)
    if durability is not None and target.mode == "cluster":
        raise ValueError(
            "AGENTIHOOKS_REDIS_WAIT_REPLICAS is not supported on a Redis Cluster: a cluster client "
            "cannot pipeline WAIT on the write's connection; set min-replicas-to-write on its primaries"
        )
    kw: dict[str, Any] = {"socket_timeout": socket_timeout}
    if password:
        kw["password"] = password
    tls: dict[str, Any] = _tls(url, target.tls or url.startswith("rediss://"), ca_file)
    client: redis.Redis
    if target.mode == "standalone":
        client = redis.Redis.from_url(url, **kw, **tls)
    elif target.mode == "cluster":
        cluster = RedisCluster(
            startup_nodes=[ClusterNode(h, p) for h, p in target.nodes],  # type: ignore[no-untyped-call]
            username=target.username,
            password=kw.get("password", target.password),
            ssl=target.tls,
            socket_timeout=socket_timeout,
            **tls,
        )
        client = cast(redis.Redis, cluster)
    else:
        sentinel_kw: dict[str, Any] = {"socket_timeout": socket_timeout}
        if sentinel_password:
            sentinel_kw["password"] = sentinel_password
        sentinels = Sentinel(list(target.nodes), sentinel_kwargs=sentinel_kw, socket_timeout=socket_timeout)  # type: ignore[no-untyped-call]
        node_kw: dict[str, Any] = {"db": target.db, "username": target.username}
        node_kw["password"] = kw.get("password", target.password)
        if target.tls:
            node_kw["ssl"] = True
            node_kw.update(tls)
        master = target.master or ""  # parse() requires one
        client = sentinels.master_for(master, socket_timeout=socket_timeout, **node_kw)  # type: ignore[no-untyped-call]
    attach(client, durability)
    return client


def _tls(url: str, tls: bool, ca_file: str | None) -> dict[str, Any]:
    """The client's certificate settings: the CA bundle to verify the server with, if one is given."""
    if not ca_file:
        return {}
    if not tls:
        raise _bad(url, "AGENTIHOOKS_REDIS_CA_FILE is set, but the URL has no TLS (use rediss://)")
    try:
        with open(ca_file, "rb") as f:
            head = f.read(4096)
    except OSError as e:
        raise ValueError(f"AGENTIHOOKS_REDIS_CA_FILE {ca_file!r} cannot be read: {e.strerror}") from e
    if b"-----BEGIN CERTIFICATE-----" not in head:
        raise ValueError(f"AGENTIHOOKS_REDIS_CA_FILE {ca_file!r} holds no PEM certificate")
    return {"ssl_ca_certs": ca_file}
