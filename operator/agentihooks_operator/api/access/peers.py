"""Which advertised addresses a replica may forward to: only a live operator Pod's own IP.

The address registry (:mod:`.endpoints`) lives in Redis, and whatever can write
Redis (a leaked password, a misused client) could point an entry anywhere: at
a service of its own that collects forwarded requests, or at a link-local
metadata address. Checked shape (:func:`~.endpoints.plain_address`) is not
enough, so before contacting a holder the forwarding replica asks the API
server, not Redis, whether the address belongs to that holder.

- **In a cluster** (the chart sets ``AGENTIHOOKS_OPERATOR_NAMESPACE`` and
  ``AGENTIHOOKS_OPERATOR_POD_SELECTOR``): the holder's id is its Pod's name
  (``AGENTIHOOKS_OPERATOR_ID`` comes from ``metadata.name``). The address is
  accepted only when that Pod exists in the operator's namespace, carries
  every selector label, is not being deleted, lists the address's IP in
  ``status.podIPs``, and declares the address's port as its control API port
  (a container port named ``http``, as the chart's Deployment does): the same
  Pod's other ports (its health port, a sidecar's) are never contacted. One
  ``get pods`` per holder and address; a yes is reused for ``ttl`` seconds, a
  no is asked again at the next request.
- **Outside a cluster** (neither set: replicas run as local processes):
  only loopback addresses are accepted.

:class:`PodPeers` is blocking (the Kubernetes client is); the API calls it off
its event loop, as it does Redis.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol
from urllib.parse import urlsplit

from ...k8s.config import parse_selector
from ...k8s.errors import ApiError


class Peers(Protocol):
    def allowed(self, operator_id: str, url: str) -> bool:
        """Whether ``url`` is where operator ``operator_id`` really listens (blocking)."""
        ...


def address_ip(url: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(urlsplit(url).hostname or "")
    except ValueError:
        return None


class LoopbackPeers:
    """Operators run as local processes: only an address on this machine's loopback is a peer."""

    def allowed(self, operator_id: str, url: str) -> bool:
        ip = address_ip(url)
        return ip is not None and ip.is_loopback


#: The name of the operator container's control API port (the chart's Deployment).
CONTROL_PORT_NAME = "http"


def address_port(url: str) -> int | None:
    """The URL's port (the scheme's default when none is written); ``None`` for a malformed one."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        return None
    return port if port is not None else {"http": 80, "https": 443}.get(parts.scheme)


def declares_port(pod: Mapping[str, Any], port: int) -> bool:
    """Whether one of the Pod's containers declares ``port`` as its control API port."""
    for container in (pod.get("spec") or {}).get("containers") or []:
        for p in container.get("ports") or []:
            if p.get("name") == CONTROL_PORT_NAME and p.get("containerPort") == port:
                return True
    return False


def pod_serves(
    pod: Mapping[str, Any] | None, ip: str, labels: Mapping[str, str], port: int | None = None
) -> bool:
    """Whether ``pod`` is a live operator Pod (every label of ``labels``) listing ``ip`` as its own,
    and (with ``port``) declaring that port as its control API's."""
    if not pod:
        return False
    if port is not None and not declares_port(pod, port):
        return False
    meta = pod.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return False
    own = meta.get("labels") or {}
    if any(own.get(k) != v for k, v in labels.items()):
        return False
    status = pod.get("status") or {}
    ips = {str(p.get("ip")) for p in status.get("podIPs") or [] if isinstance(p, dict)}
    if status.get("podIP"):
        ips.add(str(status["podIP"]))
    return any(_same_ip(ip, other) for other in ips)


def _same_ip(a: str, b: str) -> bool:
    try:
        return ipaddress.ip_address(a) == ipaddress.ip_address(b)
    except ValueError:
        return False


class PodPeers:
    """An address is a peer's when the API server lists it as that operator Pod's IP (see module).

    ``kube`` gives the Kubernetes client when it is needed (the operator makes it at start-up).
    """

    def __init__(
        self,
        kube: Callable[[], Any],
        namespace: str,
        labels: Mapping[str, str],
        *,
        ttl: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not namespace:
            raise ValueError("checking peers by their Pods needs the operator's namespace")
        self.kube = kube
        self.namespace = namespace
        self.labels = dict(labels)
        self.ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._known: dict[tuple[str, str], float] = {}

    def allowed(self, operator_id: str, url: str) -> bool:
        ip, port = address_ip(url), address_port(url)
        if ip is None or port is None or not operator_id:
            return False
        key = (operator_id, f"{ip}:{port}")
        now = self._clock()
        with self._lock:
            if self._known.get(key, float("-inf")) > now:
                return True
        try:
            pod = self.kube().get("pods", self.namespace, operator_id)
        except (ApiError, OSError, ValueError):
            return False  # the API server cannot say: no one is contacted
        if not pod_serves(pod, str(ip), self.labels, port):
            with self._lock:
                self._known.pop(key, None)
            return False
        with self._lock:
            self._known[key] = now + self.ttl
        return True


def peers_from_settings(kube: Callable[[], Any], namespace: str, selector: str) -> Peers:
    """:class:`PodPeers` when the operator knows its namespace (the chart), else :class:`LoopbackPeers`."""
    if not namespace:
        return LoopbackPeers()
    return PodPeers(kube, namespace, parse_selector(selector))
