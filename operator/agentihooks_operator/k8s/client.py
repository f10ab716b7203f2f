"""The operator's synchronous Kubernetes client for the recovery pass.

The recovery core is synchronous (redis-py) and runs in worker threads, so its
launcher needs blocking calls; kopf's own client is async and private. This
client sends plain JSON on the generic REST paths (:func:`path_for`) through
the official ``kubernetes`` package's ``ApiClient``, which brings what a
hand-written client lacks: every kubeconfig form (client certificates,
tokens, exec and auth-provider plugins) and, in a Pod, a service-account
token that is re-read from its file as the kubelet rotates it.

Answers become :class:`ApiError` with the HTTP status kept, so callers treat
404 and 409 as facts rather than failures. Throttling (429, honouring
``Retry-After``), 500/502/503/504 and connection failures are retried with
jittered exponential backoff, a bounded number of times (:class:`Retries`).
Every client owns its ``Configuration`` and ``ApiClient``: the package's
global default configuration is never read or changed here.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import urllib3
from agentihooks_checkpoint.retry import Backoff, retry_after_seconds
from kubernetes.client import ApiClient, Configuration
from kubernetes.client.exceptions import ApiException
from kubernetes.config import kube_config
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.incluster_config import (
    SERVICE_CERT_FILENAME,
    SERVICE_TOKEN_FILENAME,
    InClusterConfigLoader,
)

from .errors import ApiError, NoCredentials
from .throttle import ClientLimits, bucket_for

log = logging.getLogger(__name__)

CORE = "/api/v1"
DEFAULT_AGENT = "agentihooks-operator"
#: Answers worth another try: throttled, or the server (or a proxy in front of it) failed.
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
_VERBS = {"POST": "create", "PATCH": "patch", "DELETE": "delete", "PUT": "update"}


def _unsent(error: BaseException) -> bool:
    """Whether a transport failure happened before the request could leave: no connection was made
    (refused, no route, the name did not resolve, the connect timed out)."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, (urllib3.exceptions.ConnectTimeoutError, ConnectionRefusedError)):
            return True
        if isinstance(cause, urllib3.exceptions.MaxRetryError) and cause.reason is not None:
            cause = cause.reason
            continue
        return False
    return False


def path_for(resource: str, namespace: str | None, name: str | None = None, sub: str | None = None) -> str:
    """``pods`` → ``/api/v1/namespaces/<ns>/pods[/<name>[/<sub>]]``; ``group/version/plural`` for others."""
    base = CORE if "/" not in resource else "/apis/" + resource.rsplit("/", 1)[0]
    plural = resource.rsplit("/", 1)[-1]
    path = f"{base}/namespaces/{namespace}/{plural}" if namespace else f"{base}/{plural}"
    if name:
        path += f"/{name}"
    if sub:
        path += f"/{sub}"
    return path


@dataclass(frozen=True)
class Retries:
    """How a failed Kubernetes call is tried again: the product's one :class:`Backoff` (jittered,
    exponential, ``Retry-After`` obeyed up to a cap), at most ``tries`` sends in all, and no retry
    once ``budget`` seconds have passed since the first send (the default worst case sleeps ~4 s over
    5 tries, or ~10 s when the server keeps asking for 5 s)."""

    tries: int = 5
    base_delay: float = 0.25
    max_delay: float = 4.0
    retry_after_cap: float = 5.0
    budget: float = 10.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after the ``attempt``-th send failed (1-based)."""
        return Backoff(self.base_delay, self.max_delay, self.retry_after_cap).delay(attempt, retry_after)


def api_error(status: int, method: str, path: str, raw: bytes, http_reason: str | None = None) -> ApiError:
    """The :class:`ApiError` for a refused call, with the reason and message of the API's ``Status``.

    The message is the API server's own (for a 403 it names the identity,
    the verb, the resource and the namespace); only the Status is read,
    never the request, so no token or Secret content ends up in it.
    """
    doc: Any = None
    try:
        doc = json.loads(raw) if raw else None
    except ValueError:
        doc = None
    doc = doc if isinstance(doc, dict) else {}
    reason = str(doc.get("reason") or http_reason or "error")
    message = " ".join(str(doc.get("message") or "").split())[:500]
    if not message and status == 403:
        message = f"forbidden: cannot {verb_of(method, path)} {path}"
    return ApiError(status, method, path, reason, message)


def verb_of(method: str, path: str) -> str:
    """The RBAC verb of a call on a generic path (a GET of a collection is ``list``)."""
    if method == "GET":
        parts = path.split("?", 1)[0].strip("/").split("/")
        base = 2 if parts[0] == "api" else 3  # api/v1/... or apis/<group>/<version>/...
        rest = parts[base:]
        if rest[:1] == ["namespaces"] and len(rest) >= 3:
            rest = rest[2:]
        return "get" if len(rest) >= 2 else "list"
    return _VERBS.get(method, method.lower())


def refused_call(method: str, path: str) -> tuple[str, str, str | None]:
    """``(verb, resource, namespace)`` of a call on a generic path (``pods``, ``swarms/status``...)."""
    parts = path.split("?", 1)[0].strip("/").split("/")
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
    namespace = None
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    resource = rest[0] if rest else path
    if len(rest) >= 3:
        resource += "/" + rest[2]
    return verb_of(method, path), resource, namespace


def describe_refusal(error: ApiError) -> str:
    """One line naming what RBAC refused: verb, resource and namespace, then the API server's words."""
    verb, resource, namespace = refused_call(error.method, error.path)
    where = f"in namespace {namespace}" if namespace else "cluster-wide"
    said = f" ({error.message})" if error.message else ""
    return (
        f"forbidden: the operator may not {verb} {resource} {where}{said}; "
        "grant it in the operator's Role or ClusterRole (the Helm chart's RBAC)"
    )


def in_cluster_configuration(
    *,
    token_filename: str = SERVICE_TOKEN_FILENAME,
    cert_filename: str = SERVICE_CERT_FILENAME,
    environ: Mapping[str, str] | None = None,
) -> Any:
    """The service account's ``Configuration`` (raises ``ConfigException`` outside a Pod).

    ``try_refresh_token=True`` installs the package's ``refresh_api_key_hook``:
    before each request the token file is read again once the last read is a
    minute old (client-go's period too), so a projected token the kubelet
    rotates is picked up without a restart.
    """
    config = Configuration()
    loader = InClusterConfigLoader(  # type: ignore[no-untyped-call]
        token_filename=token_filename,
        cert_filename=cert_filename,
        try_refresh_token=True,
        environ=os.environ if environ is None else environ,
    )
    loader.load_and_set(config)  # type: ignore[no-untyped-call]
    return config


def kubeconfig_configuration(config_file: str | None = None, context: str | None = None) -> Any:
    """The ``Configuration`` of a kubeconfig (``$KUBECONFIG``, read now, else ``~/.kube/config``).

    Everything the package's loader supports works: client certificates,
    static or file tokens, exec plugins and auth providers (their tokens are
    renewed when they expire). Nothing is written back to the file.
    """
    config = Configuration()
    kube_config.load_kube_config(  # type: ignore[no-untyped-call]
        config_file=config_file or os.environ.get("KUBECONFIG") or "~/.kube/config",
        context=context,
        client_configuration=config,
        persist_config=False,
    )
    return config


def follow_kubeconfig_env() -> None:
    """Point the ``kubernetes`` package's default kubeconfig location at today's ``$KUBECONFIG``.

    The package reads ``$KUBECONFIG`` once, when it is imported; kopf's
    ``login_via_client`` relies on that default. An operator started in a
    process whose environment changed after the import (embedded, or in
    tests) would otherwise log kopf in with another file than its own client.
    """
    kube_config.KUBE_CONFIG_DEFAULT_LOCATION = os.environ.get("KUBECONFIG") or "~/.kube/config"


class KubeClient:
    """Blocking JSON calls against one API server."""

    def __init__(
        self,
        server: str | None = None,
        *,
        token: str | None = None,
        ca_path: str | None = None,
        ca_data: str | bytes | None = None,
        insecure: bool = False,
        cert_path: str | None = None,
        key_path: str | None = None,
        timeout: float = 10.0,
        agent: str = DEFAULT_AGENT,
        configuration: Any = None,
        retries: Retries | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        limits: ClientLimits | None = None,
    ) -> None:
        """Either ``server`` and its credentials, or a loaded ``configuration`` (owned by this client).
        ``limits``: kept connections and an optional rate (:mod:`.throttle`)."""
        if configuration is None:
            if not server:
                raise ValueError("KubeClient needs a server URL or a configuration")
            configuration = Configuration(host=server.rstrip("/"))
            configuration.verify_ssl = not insecure
            if token:
                configuration.api_key["BearerToken"] = token
                configuration.api_key_prefix["BearerToken"] = "Bearer"
            if ca_path:
                configuration.ssl_ca_cert = str(ca_path)
            if ca_data:  # base64 of PEM, as in a kubeconfig's certificate-authority-data
                raw = ca_data if isinstance(ca_data, bytes) else ca_data.encode()
                configuration.ca_cert_data = base64.b64decode(raw).decode()
            configuration.cert_file = cert_path
            configuration.key_file = key_path
        elif server is not None:
            raise ValueError("pass either a server URL or a configuration, not both")
        # Retries are ours (below); urllib3 must not retry underneath them.
        configuration.retries = False
        limits = limits or ClientLimits()
        configuration.connection_pool_maxsize = limits.connections  # read as the pool is made, below
        self.limits = limits
        self._bucket = bucket_for(limits, clock=clock, sleep=sleep)
        self.configuration = configuration
        self._api = ApiClient(configuration)
        self._api.user_agent = agent
        self._timeout = timeout
        self._retries = retries or Retries()
        self._sleep = sleep
        self._clock = clock

    @classmethod
    def from_environment(
        cls,
        *,
        agent: str = DEFAULT_AGENT,
        timeout: float = 10.0,
        retries: Retries | None = None,
        kubeconfig: str | None = None,
        context: str | None = None,
        token_filename: str = SERVICE_TOKEN_FILENAME,
        cert_filename: str = SERVICE_CERT_FILENAME,
        limits: ClientLimits | None = None,
    ) -> KubeClient:
        """Log in as kopf's ``login_via_client`` does: the service account in a Pod, else the kubeconfig."""
        try:
            configuration = in_cluster_configuration(
                token_filename=token_filename, cert_filename=cert_filename
            )
            how = "the in-cluster service account"
        except ConfigException as in_cluster:
            try:
                configuration = kubeconfig_configuration(kubeconfig, context)
            except ConfigException as e:
                raise NoCredentials(
                    f"cannot reach the Kubernetes API: no service account ({in_cluster}) "
                    f"and no usable kubeconfig ({e})"
                ) from e
            how = "the kubeconfig"
        log.info("Kubernetes API %s, credentials from %s", configuration.host, how)
        return cls(configuration=configuration, agent=agent, timeout=timeout, retries=retries, limits=limits)

    @classmethod
    def from_connection(cls, info: Any, *, agent: str = DEFAULT_AGENT) -> KubeClient:
        """Build from a ``kopf.ConnectionInfo`` (token, CA, client certificate files).

        Kept for callers that already hold one; the operator uses :meth:`from_environment`.
        """
        return cls(
            str(info.server),
            agent=agent,
            token=info.token,
            ca_path=str(info.ca_path) if info.ca_path else None,
            ca_data=info.ca_data,
            insecure=bool(info.insecure),
            cert_path=str(info.certificate_path) if getattr(info, "certificate_path", None) else None,
            key_path=str(info.private_key_path) if getattr(info, "private_key_path", None) else None,
        )

    @property
    def server(self) -> str:
        return str(self.configuration.host)

    def close(self) -> None:
        self._api.close()  # type: ignore[no-untyped-call]

    def _send(
        self,
        method: str,
        path: str,
        body: Any,
        content_type: str,
        query: Sequence[tuple[str, str]] | None,
    ) -> tuple[int, Mapping[str, str], bytes, str | None]:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        # param_serialize adds the User-Agent and the Authorization header (running the token
        # refresh hook first), and percent-encodes the query parameters.
        request = self._api.param_serialize(
            method=method,
            resource_path=path,
            query_params=list(query) if query else None,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        response = self._api.call_api(*request, _request_timeout=self._timeout)
        raw = response.read()  # type: ignore[no-untyped-call]
        return int(response.status), response.headers, bytes(raw or b""), response.reason

    def _call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        query: Sequence[tuple[str, str]] | None = None,
    ) -> dict[str, Any]:
        """One call, retried as :class:`Retries` says; the parsed JSON object, or :class:`ApiError`.

        POST, PATCH and DELETE are retried like reads. That is safe here because
        every object this operator writes has its name fixed before the first
        send (Pods, Secrets and ConfigMaps by execution id, Events by the name in
        their body): a create that took effect but whose answer was lost answers
        409 when sent again, which the callers already read as "it exists"; a
        repeated merge patch changes nothing more; a repeated delete answers 404,
        read as "already gone".
        """
        started = self._clock()
        attempt = 0
        reached = False  # whether any try may have taken effect (see ApiError.maybe_applied)
        while True:
            attempt += 1
            retry_after: float | None = None
            if self._bucket is not None:
                self._bucket.take()
            try:
                status, headers, raw, http_reason = self._send(method, path, body, content_type, query)
            except (urllib3.exceptions.HTTPError, ApiException, ConfigException, OSError) as e:
                if isinstance(e, ApiException) and "CERTIFICATE_VERIFY_FAILED" in str(e.reason):
                    raise ApiError(0, method, path, "TLS verification failed", maybe_applied=reached) from e
                reached = reached or not _unsent(e)
                failure = ApiError(
                    0, method, path, f"transport error: {type(e).__name__}", maybe_applied=reached
                )
                cause: BaseException | None = e
            else:
                if status < 400:
                    try:
                        return _json_object(raw)
                    except ValueError as e:
                        raise ApiError(status, method, path, "the answer is not JSON") from e
                failure = api_error(status, method, path, raw, http_reason)
                if status not in RETRY_STATUSES:
                    failure.maybe_applied = reached
                    raise failure
                reached = reached or status != 429
                failure.maybe_applied = reached
                retry_after = retry_after_seconds(_header(headers, "Retry-After"))
                cause = None
            wait = self._retries.delay(attempt, retry_after)
            if attempt >= self._retries.tries or self._clock() - started + wait > self._retries.budget:
                raise failure from cause
            log.info(
                "%s %s: %s; try %d of %d in %.2f s",
                method,
                path,
                failure.status or failure.reason,
                attempt + 1,
                self._retries.tries,
                wait,
            )
            self._sleep(wait)

    def get(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The object, or ``None`` when the API answers 404."""
        try:
            return self._call("GET", path_for(resource, namespace, name))
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    def list(
        self, resource: str, namespace: str | None, labels: Mapping[str, str] | None = None
    ) -> list[Any]:
        """Items of a list; the label selector is sent, and applied here too (some servers ignore it)."""
        query = [("labelSelector", ",".join(f"{k}={v}" for k, v in labels.items()))] if labels else None
        items = self._call("GET", path_for(resource, namespace), query=query).get("items") or []
        if labels:
            items = [
                i
                for i in items
                if all(((i.get("metadata") or {}).get("labels") or {}).get(k) == v for k, v in labels.items())
            ]
        return list(items)

    def create(self, resource: str, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self._call("POST", path_for(resource, namespace), body=dict(body))

    def patch(
        self, resource: str, namespace: str, name: str, body: Mapping[str, Any], *, sub: str | None = None
    ) -> dict[str, Any]:
        return self._call(
            "PATCH",
            path_for(resource, namespace, name, sub),
            body=dict(body),
            content_type="application/merge-patch+json",
        )

    def apply(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        body: Mapping[str, Any],
        *,
        manager: str,
        force: bool = False,
    ) -> dict[str, Any]:
        """Server-side apply of ``body`` as field manager ``manager`` (``force``: take fields other
        managers hold)."""
        query = [("fieldManager", manager), *([("force", "true")] if force else [])]
        return self._call(
            "PATCH",
            path_for(resource, namespace, name),
            body=dict(body),
            content_type="application/apply-patch+yaml",
            query=query,
        )

    def delete(self, resource: str, namespace: str, name: str) -> bool:
        """Delete; ``False`` when it was already gone (404)."""
        try:
            self._call("DELETE", path_for(resource, namespace, name))
        except ApiError as e:
            if e.status == 404:
                return False
            raise
        return True


def _header(headers: Mapping[str, str] | None, name: str) -> str | None:
    if not headers:
        return None
    value = headers.get(name)
    if value is None:
        value = next((v for k, v in headers.items() if k.lower() == name.lower()), None)
    return None if value is None else str(value)


def _json_object(raw: bytes) -> dict[str, Any]:
    if not raw:
        return {}
    data = json.loads(raw)
    return cast(dict[str, Any], data) if isinstance(data, dict) else {}
