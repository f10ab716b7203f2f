"""Which namespace a CLI command means when it names a Swarm.

A Swarm is its namespace and its name, and two namespaces may each hold one
of the same name. Like kubectl, the CLI takes the namespace from ``-n`` /
``--namespace`` (or ``AGENTIHOOKS_NAMESPACE``), else from the kubeconfig's
current context (``KUBECONFIG``, else ``~/.kube/config``; a context without a
namespace means ``default``), else, inside a Pod, from the namespace of its
service account. Only where none of these exists does it send the name alone,
which the controller answers while one namespace holds that name and refuses
with ``409 ambiguous_swarm`` naming them otherwise.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from .client import CliError

#: A Kubernetes namespace: an RFC 1123 DNS label.
_NAMESPACE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
#: Where a Pod's service account namespace is mounted.
POD_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
ENV = "AGENTIHOOKS_NAMESPACE"


def checked(namespace: str) -> str:
    if not _NAMESPACE.fullmatch(namespace):
        raise CliError(f"not a namespace name: {namespace!r} (lower-case letters, digits and '-')")
    return namespace


def _kubeconfig_files(environ: Mapping[str, str]) -> list[Path]:
    listed = environ.get("KUBECONFIG")
    if listed:
        return [Path(p) for p in listed.split(os.pathsep) if p]
    home = environ.get("HOME")
    return [Path(home) / ".kube" / "config"] if home else []


def _load(path: Path) -> dict[str, Any] | None:
    try:
        loaded = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return None
    return loaded if isinstance(loaded, dict) else None


def from_kubeconfig(environ: Mapping[str, str]) -> str | None:
    """The current context's namespace (``default`` when it names none), as kubectl reads it: the
    first file that sets ``current-context`` decides it, and the first file defining that context
    gives its namespace. ``None`` when there is no kubeconfig or no current context."""
    docs = [d for d in (_load(p) for p in _kubeconfig_files(environ)) if d is not None]
    current = next((d["current-context"] for d in docs if d.get("current-context")), None)
    if not current:
        return None
    for doc in docs:
        for entry in doc.get("contexts") or []:
            if isinstance(entry, dict) and entry.get("name") == current:
                context = entry.get("context") or {}
                namespace = context.get("namespace") if isinstance(context, dict) else None
                return str(namespace) if namespace else "default"
    return None


def from_pod(path: Path | None = None) -> str | None:
    """The namespace of this Pod's service account, when it runs in one."""
    try:
        text = (path or POD_NAMESPACE).read_text().strip()
    except OSError:
        return None
    return text if _NAMESPACE.fullmatch(text) else None


def resolve(flag: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The namespace a command means, or ``None`` to name the Swarm alone (see the module)."""
    env = os.environ if environ is None else environ
    if flag:
        return checked(flag)
    if env.get(ENV):
        return checked(env[ENV])
    found = from_kubeconfig(env) or from_pod()
    return checked(found) if found else None


def source(flag: str | None, environ: Mapping[str, str] | None = None) -> str:
    """Where :func:`resolve` took the namespace from, in words (said when a Swarm is not found)."""
    env = os.environ if environ is None else environ
    if flag:
        return "-n"
    if env.get(ENV):
        return f"${ENV}"
    docs = [d for d in (_load(p) for p in _kubeconfig_files(env)) if d is not None]
    current = next((d["current-context"] for d in docs if d.get("current-context")), None)
    if current and from_kubeconfig(env):
        return f"the kubeconfig context {current!r}"
    return "this Pod's service account"


def swarm_path(name: str, namespace: str | None) -> str:
    """The control-API path of a Swarm: namespaced when the namespace is known."""
    return f"/v1/namespaces/{namespace}/swarms/{name}" if namespace else f"/v1/swarms/{name}"
