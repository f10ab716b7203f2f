"""A small synchronous Kubernetes REST client for the recovery pass.

The recovery core is synchronous (redis-py) and runs in a worker thread, so
its launcher needs blocking calls; kopf's own client is async and private.
This client speaks plain JSON over httpx, with the same credentials kopf logs
in with (service account in a cluster, else the kubeconfig), and turns API
answers into :class:`ApiError` with the HTTP status kept, so callers can
treat 404 and 409 as facts rather than failures.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Mapping
from typing import Any

import httpx

from .errors import ApiError

CORE = "/api/v1"


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


class KubeClient:
    """Blocking JSON calls against one API server."""

    def __init__(
        self,
        server: str,
        *,
        token: str | None = None,
        ca_path: str | None = None,
        ca_data: str | bytes | None = None,
        insecure: bool = False,
        timeout: float = 10.0,
        agent: str = "agentihooks-operator",
    ) -> None:
        verify: bool | ssl.SSLContext = not insecure
        if not insecure and (ca_path or ca_data):
            ctx = ssl.create_default_context()
            if ca_path:
                ctx.load_verify_locations(cafile=str(ca_path))
            elif ca_data:
                import base64

                raw = ca_data if isinstance(ca_data, bytes) else ca_data.encode()
                with tempfile.NamedTemporaryFile("wb", suffix=".crt", delete=False) as f:
                    f.write(base64.b64decode(raw))
                ctx.load_verify_locations(cafile=f.name)
                os.unlink(f.name)
            verify = ctx
        headers = {"Accept": "application/json", "User-Agent": agent}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.Client(base_url=server, headers=headers, verify=verify, timeout=timeout)

    @classmethod
    def from_connection(cls, info: Any, *, agent: str = "agentihooks-operator") -> KubeClient:
        """Build from a ``kopf.ConnectionInfo`` (what kopf's login handlers return)."""
        return cls(
            str(info.server),
            agent=agent,
            token=info.token,
            ca_path=str(info.ca_path) if info.ca_path else None,
            ca_data=info.ca_data,
            insecure=bool(info.insecure),
        )

    def close(self) -> None:
        self._http.close()

    def _call(
        self, method: str, path: str, *, body: Any = None, content_type: str = "application/json"
    ) -> dict[str, Any]:
        try:
            resp = self._http.request(
                method, path, json=body, headers={"Content-Type": content_type} if body is not None else None
            )
        except httpx.HTTPError as e:
            raise ApiError(0, method, path, f"transport error: {type(e).__name__}") from e
        if resp.status_code >= 400:
            try:
                reason = str(resp.json().get("reason") or resp.reason_phrase)
            except ValueError:
                reason = resp.reason_phrase
            raise ApiError(resp.status_code, method, path, reason)
        data = resp.json() if resp.content else {}
        return data if isinstance(data, dict) else {}

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
        path = path_for(resource, namespace)
        if labels:
            path += "?labelSelector=" + ",".join(f"{k}={v}" for k, v in labels.items())
        items = self._call("GET", path).get("items") or []
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

    def delete(self, resource: str, namespace: str, name: str) -> bool:
        """Delete; ``False`` when it was already gone (404)."""
        try:
            self._call("DELETE", path_for(resource, namespace, name))
        except ApiError as e:
            if e.status == 404:
                return False
            raise
        return True
