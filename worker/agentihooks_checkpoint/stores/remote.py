"""A checkpoint store proxied by the controller, for workers launched with ``checkpoint_remote: true``.

The worker never holds storage credentials: every primitive is a call to the
control API's scoped routes, authorised by the attempt's own worker credential
(``AGENTIHOOKS_WORKER_TOKEN``). The controller lets it read only the
checkpoint its directive names and write only under its own task and
generation scope; uploads and downloads are streamed. :class:`ControlReporter`
sends the restore outcome and the session/watermark heartbeats the same way.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, BinaryIO, cast

import httpx

from ..directive import RestoreOutcome
from ..errors import CheckpointError, CheckpointExists, ObjectMissing, StoreError
from ..scope import StoreScope
from .base import CheckpointStore

TOKEN_ENV = "AGENTIHOOKS_WORKER_TOKEN"  # noqa: S105 - a variable name, not a secret
CHUNK = 256 * 1024
RETRIES = 5
MAX_WAIT = 5.0


class ControlRefused(StoreError):
    """The controller refused a call; ``status`` and ``code`` come from its answer (never a token)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"the controller refused the call ({status} {code}): {message}")
        self.status = status
        self.code = code
        self.message = message


def _refusal(resp: httpx.Response) -> ControlRefused:
    try:
        body = resp.json()
        code, message = str(body.get("error", "")), str(body.get("message", ""))
    except (ValueError, AttributeError):
        code, message = "", resp.reason_phrase
    return ControlRefused(resp.status_code, code or str(resp.status_code), message)


class _Stream:
    """A read-only file-like view of a streamed HTTP body."""

    def __init__(self, resp: httpx.Response) -> None:
        self._chunks = resp.iter_bytes(CHUNK)
        self._buf = b""
        self._done = False

    def read(self, n: int = -1) -> bytes:
        while not self._done and (n is None or n < 0 or len(self._buf) < n):
            try:
                self._buf += next(self._chunks)
            except StopIteration:
                self._done = True
        if n is None or n < 0:
            out, self._buf = self._buf, b""
        else:
            out, self._buf = self._buf[:n], self._buf[n:]
        return out


class _Client:
    def __init__(
        self, control_url: str, execution_id: str, token: str, http: httpx.Client | None, retries: int = 5
    ) -> None:
        if not token:
            raise StoreError(f"no worker credential: {TOKEN_ENV} is empty")
        self.execution_id = execution_id
        self.http = http or httpx.Client(timeout=httpx.Timeout(30.0, read=300.0))
        self.base = control_url.rstrip("/") + f"/v1/executions/{execution_id}"
        self.headers = {"Authorization": f"Bearer {token}"}
        self.retries = retries

    def request(
        self, method: str, path: str, *, headers: dict[str, str] | None = None, **kw: Any
    ) -> httpx.Response:
        """One call; a ``503`` (nothing was done: Redis down or not the lease holder) is retried.

        ``content`` may be a callable returning a fresh body, so a streamed upload can be sent again.
        """
        content = kw.pop("content", None)
        for attempt in range(self.retries + 1):
            body = content() if callable(content) else content
            try:
                resp = self.http.request(
                    method, self.base + path, headers={**self.headers, **(headers or {})}, content=body, **kw
                )
            except httpx.HTTPError as e:
                raise StoreError(f"the controller cannot be reached ({type(e).__name__})") from e
            if resp.status_code != 503 or attempt == self.retries:
                return resp
            time.sleep(_retry_after(resp))
        raise StoreError("the controller stayed unavailable")


def _retry_after(resp: httpx.Response) -> float:
    try:
        return min(MAX_WAIT, max(0.1, float(resp.headers.get("Retry-After", "1"))))
    except ValueError:
        return 1.0


class RemoteStore(CheckpointStore):
    """Checkpoint primitives over the controller's ``checkpoint-store`` routes."""

    max_concurrency = 4

    def __init__(
        self,
        control_url: str,
        execution_id: str,
        token: str,
        *,
        http: httpx.Client | None = None,
        retries: int = RETRIES,
    ) -> None:
        self._c = _Client(control_url, execution_id, token, http, retries)

    @classmethod
    def from_env(cls, control_url: str, execution_id: str, environ: Mapping[str, str]) -> RemoteStore:
        return cls(control_url, execution_id, environ.get(TOKEN_ENV, ""))

    def __repr__(self) -> str:
        return "RemoteStore()"

    @staticmethod
    def _params(scope: StoreScope, **extra: str) -> dict[str, str]:
        return {
            "swarm": scope.swarm,
            "task_id": scope.task_id,
            "task_generation": str(scope.task_generation),
            **extra,
        }

    def open_read(self, scope: StoreScope, key: str) -> AbstractContextManager[BinaryIO]:
        return self._open(scope, key)

    @contextmanager
    def _open(self, scope: StoreScope, key: str) -> Iterator[BinaryIO]:
        c = self._c
        try:
            with c.http.stream(
                "GET",
                c.base + "/checkpoint-store/object",
                params=self._params(scope, key=key),
                headers=c.headers,
            ) as resp:
                if resp.status_code == 404:
                    raise ObjectMissing("no such object")
                if resp.status_code != 200:
                    resp.read()
                    raise _refusal(resp)
                yield cast(BinaryIO, _Stream(resp))
        except httpx.HTTPError as e:
            raise StoreError(f"the controller cannot be reached ({type(e).__name__})") from e

    def size_of(self, scope: StoreScope, key: str) -> int | None:
        resp = self._c.request("GET", "/checkpoint-store/size", params=self._params(scope, key=key))
        if resp.status_code != 200:
            raise _refusal(resp)
        size = resp.json().get("size")
        return int(size) if size is not None else None

    def _put(self, scope: StoreScope, key: str, content: Any, *, once: bool, length: int) -> None:
        params = self._params(scope, key=key, mode="once" if once else "replace")
        headers = {"Content-Type": "application/octet-stream", "Content-Length": str(length)}
        resp = self._c.request(
            "PUT", "/checkpoint-store/object", params=params, content=content, headers=headers
        )
        if resp.status_code == 201:
            return
        if resp.status_code == 409 and once:
            raise CheckpointExists("this checkpoint is already committed")
        raise _refusal(resp)

    def write_file(self, scope: StoreScope, key: str, path: Path) -> None:
        def chunks() -> Iterator[bytes]:
            with path.open("rb") as f:
                while chunk := f.read(CHUNK):
                    yield chunk

        self._put(scope, key, chunks, once=False, length=path.stat().st_size)

    def write_bytes(self, scope: StoreScope, key: str, data: bytes) -> None:
        self._put(scope, key, data, once=False, length=len(data))

    def write_once(self, scope: StoreScope, key: str, data: bytes) -> None:
        self._put(scope, key, data, once=True, length=len(data))

    def list_keys(self, scope: StoreScope, under: str) -> list[str]:
        resp = self._c.request("GET", "/checkpoint-store/keys", params=self._params(scope, under=under))
        if resp.status_code != 200:
            raise _refusal(resp)
        return [str(k) for k in resp.json().get("keys", [])]


class ControlReporter:
    """Sends a worker's restore outcome and heartbeats to the controller (the worker's reporter)."""

    def __init__(
        self,
        control_url: str,
        execution_id: str,
        token: str,
        *,
        http: httpx.Client | None = None,
        retries: int = RETRIES,
    ) -> None:
        self._c = _Client(control_url, execution_id, token, http, retries)

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        resp = self._c.request("POST", path, json=body)
        if resp.status_code != 200:
            raise _refusal(resp)
        data = resp.json()
        return data if isinstance(data, dict) else {}

    def report_outcome(self, outcome: RestoreOutcome) -> None:
        if outcome.execution_id != self._c.execution_id:
            raise CheckpointError("an outcome is reported only for this worker's own execution")
        self._post("/outcome", outcome.model_dump(mode="json"))

    def report_progress(self, execution_id: str, session_id: str | None, watermark: int | None) -> None:
        if execution_id != self._c.execution_id:
            raise CheckpointError("progress is reported only for this worker's own execution")
        if session_id is not None:
            self._post("/session", {"session_id": session_id})
        if watermark is not None:
            self._post("/watermark", {"watermark": watermark})
