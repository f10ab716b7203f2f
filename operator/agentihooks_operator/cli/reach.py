"""How the CLI reaches the control API when it is given no URL: through the kubeconfig, as kubectl would.

A cluster operator has a kubeconfig, not a URL and a token. With neither ``--control-url`` nor
``AGENTIHOOKS_CONTROL_URL`` set, the CLI uses the kubeconfig's current context (``KUBECONFIG``, else
``~/.kube/config``) to:

1. find the chart's control Service (labels ``app.kubernetes.io/part-of=agentihooks-recovery`` and
   ``app.kubernetes.io/component=operator``) in ``--operator-namespace``, or in every namespace the
   user may list, or else in the context's own namespace;
2. pick a ready operator Pod behind it and open a port-forward to it through the API server (the
   same ``pods/portforward`` subresource ``kubectl port-forward`` uses), served on a loopback port
   of this process for as long as the command runs;
3. unless ``--token``/``AGENTIHOOKS_TOKEN`` is given, read the operator token from the Secret the
   operator's Pod takes ``AGENTIHOOKS_OPERATOR_TOKEN`` from, when the user may read it.

Every step that fails names the context, the namespace and the object it looked at, and what to
pass instead; the token is never printed.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from typing import Any

from .client import EXIT_UNREACHABLE, CliError, ControlClient
from .forward import Forwarder

SELECTOR = "app.kubernetes.io/part-of=agentihooks-recovery,app.kubernetes.io/component=operator"
TOKEN_ENV = "AGENTIHOOKS_OPERATOR_TOKEN"  # noqa: S105 (the name of a variable, not a token)
OPERATOR_NAMESPACE_ENV = "AGENTIHOOKS_OPERATOR_NAMESPACE"


@dataclass
class Reached:
    """A control URL (a loopback port-forward) and the token read for it (``None``: none found)."""

    url: str
    token: str | None
    forwarder: Forwarder
    where: str


def _fail(line: str) -> CliError:
    return CliError(line, EXIT_UNREACHABLE)


def _clients(context: str | None) -> tuple[Any, str, str]:
    """The CoreV1 API of the kubeconfig's context, that context's name and its namespace."""
    from kubernetes import client, config  # imported here: a CLI given a URL never loads it
    from kubernetes.config.config_exception import ConfigException

    try:
        # read now, not when the client module was imported (it takes KUBECONFIG at import)
        files = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
        contexts, active = config.list_kube_config_contexts(files)  # type: ignore[no-untyped-call]
        chosen = next((c for c in contexts if c["name"] == context), None) if context else active
        if chosen is None:
            raise _fail(f"the kubeconfig has no context {context!r}")
        api = config.new_client_from_config(files, context=chosen["name"])  # type: ignore[no-untyped-call]
    except (ConfigException, OSError, TypeError) as e:
        raise _fail(
            "no control URL and no usable kubeconfig: pass --control-url or set AGENTIHOOKS_CONTROL_URL, "
            f"or point KUBECONFIG at a cluster ({type(e).__name__}: {e})"
        ) from e
    namespace = (chosen.get("context") or {}).get("namespace") or "default"
    return client.CoreV1Api(api), str(chosen["name"]), str(namespace)


def _api_error(e: Exception, doing: str, where: str) -> CliError:
    status = getattr(e, "status", None)
    if status == 403:
        return _fail(f"{doing}: forbidden for the kubeconfig's user ({where})")
    if status == 401:
        return _fail(f"{doing}: the API server did not accept the kubeconfig's credentials ({where})")
    return _fail(f"{doing}: {type(e).__name__} {status or ''} ({where})".replace("  ", " "))


def _services(core: Any, namespace: str | None, own: str, context: str) -> tuple[list[Any], str]:
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    scope = f"namespace {namespace!r}" if namespace else "all namespaces"
    where = f"{scope}, context {context!r}"
    try:
        if namespace:
            return core.list_namespaced_service(namespace, label_selector=SELECTOR).items, where
        return core.list_service_for_all_namespaces(label_selector=SELECTOR).items, where
    except ApiException as e:
        if namespace or e.status != 403:
            raise _api_error(e, "listing the control Services", where) from e
    except HTTPError as e:  # no API server at the context's address (the client's retries spent)
        raise _fail(f"cannot reach the API server of context {context!r} ({type(e).__name__})") from e
    return _services(core, own, own, context)  # may not list every namespace: the context's own


def _ready(pod: Any) -> bool:
    conditions = (pod.status and pod.status.conditions) or []
    return pod.status.phase == "Running" and any(c.type == "Ready" and c.status == "True" for c in conditions)


def _target_port(service: Any, pod: Any) -> int:
    ports = service.spec.ports or []
    port = next((p for p in ports if p.name == "http"), ports[0] if ports else None)
    if port is None:
        raise _fail(f"Service {service.metadata.namespace}/{service.metadata.name} has no port")
    target = port.target_port if port.target_port is not None else port.port
    if isinstance(target, int) or str(target).isdigit():
        return int(target)
    for container in pod.spec.containers:
        for cp in container.ports or []:
            if cp.name == target:
                return int(cp.container_port)
    raise _fail(f"no container port named {target!r} in Pod {pod.metadata.namespace}/{pod.metadata.name}")


def _token(core: Any, pod: Any, where: str) -> str | None:
    from kubernetes.client.exceptions import ApiException

    for container in pod.spec.containers:
        for env in container.env or []:
            ref = env.value_from and env.value_from.secret_key_ref
            if env.name != TOKEN_ENV or not ref:
                continue
            name = f"{pod.metadata.namespace}/{ref.name}"
            try:
                secret = core.read_namespaced_secret(ref.name, pod.metadata.namespace)
            except ApiException as e:
                raise _api_error(
                    e,
                    f"reading the operator token from Secret {name} (pass --token or set AGENTIHOOKS_TOKEN)",
                    where,
                ) from e
            value = (secret.data or {}).get(ref.key)
            if value is None:
                raise _fail(f"Secret {name} has no key {ref.key!r} ({where})")
            return base64.b64decode(value).decode().strip()
    return None


def through_kubeconfig(
    operator_namespace: str | None, want_token: bool, context: str | None = None
) -> Reached:
    """Find the control API through the kubeconfig and open a port-forward to it (see the module)."""
    from kubernetes.client.exceptions import ApiException

    core, context_name, own = _clients(context)
    operator_namespace = operator_namespace or os.environ.get(OPERATOR_NAMESPACE_ENV) or None
    services, where = _services(core, operator_namespace, own, context_name)
    if not services:
        raise _fail(
            f"no agentihooks control Service ({SELECTOR}) in {where}: pass --operator-namespace "
            "(the chart's release namespace) or --control-url"
        )
    if len(services) > 1:
        names = ", ".join(sorted(f"{s.metadata.namespace}/{s.metadata.name}" for s in services))
        raise _fail(
            f"several agentihooks control Services ({names}): pass --operator-namespace or --control-url"
        )
    service = services[0]
    ns, name = service.metadata.namespace, service.metadata.name
    where = f"Service {ns}/{name}, context {context_name!r}"
    selector = ",".join(f"{k}={v}" for k, v in sorted((service.spec.selector or {}).items()))
    try:
        pods = [p for p in core.list_namespaced_pod(ns, label_selector=selector).items if _ready(p)]
    except ApiException as e:
        raise _api_error(e, "listing the operator Pods", where) from e
    if not pods or not selector:
        raise _fail(f"no ready operator Pod behind {where}")
    pod = sorted(pods, key=lambda p: p.metadata.name)[0]
    port = _target_port(service, pod)
    forwarder = Forwarder(core, ns, pod.metadata.name, port)
    forwarder.start()  # one probe connection first: a refused port-forward is said here, plainly
    token = _token(core, pod, where) if want_token else None
    return Reached(forwarder.url, token, forwarder, f"{where}, Pod {pod.metadata.name}")


def control_client(obj: dict[str, Any], *, timeout: float | None = -1.0) -> ControlClient:
    """The command's client: to ``--control-url`` when one is given, else through the kubeconfig.
    ``timeout``: seconds per request (``None``: no limit); by default ``--request-timeout``'s (30 s)."""
    if timeout is not None and timeout < 0:
        timeout = obj.get("timeout", 30.0)
    url, token = obj.get("url"), obj.get("token")
    if not url:
        reached = through_kubeconfig(
            obj.get("operator_namespace"), want_token=not token, context=obj.get("context")
        )
        url, token = reached.url, token or reached.token
    return ControlClient(url, token, timeout=timeout, ca_file=obj.get("ca_file"))
