"""A checkpoint store proxied by the controller, for workers launched with ``checkpoint_remote: true``.

The worker never holds storage credentials: every primitive is a call to the
control API's scoped routes, authorised by the attempt's own worker credential
(``AGENTIHOOKS_WORKER_TOKEN``). The controller lets it read only the
checkpoint its directive names and write only under its own task and
generation scope; uploads and downloads are streamed. :class:`ControlReporter`
sends the restore outcome and the session/watermark heartbeats the same way, and
the restore report the controller's metrics count (best effort, see
:meth:`ControlReporter.report_restore`).

The controller may be away for a while (a rolling update, a restart, a
replica losing its lease): every call is retried on connection errors,
timeouts and ``502``/``503``/``504`` answers with jittered exponential backoff
(a ``Retry-After`` is honoured) until ``retry_seconds`` (default
:data:`RETRY_SECONDS`, ``AGENTIHOOKS_CONTROL_RETRY_SECONDS``) have passed
since the call began; only then does it fail with :class:`StoreUnreachable`.
A download cut off midway is opened again and continues where it stopped
(the bytes already read are skipped: objects are immutable and verified by
hash anyway). Nothing else is retried: a refusal (4xx) is final. While it retries,
the worker says so once, then every :data:`NOTICE_SECONDS` (:class:`RetryNotice`),
and once more when the controller answers again; no line names a URL (httpx's
own per-request lines are silenced by the worker's logging set-up).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import Any, BinaryIO, cast

import httpx

from ..directive import RestoreOutcome
from ..errors import CheckpointError, CheckpointExists, ObjectMissing, StoreError, StoreUnreachable
from ..retry import Backoff, retry_after_seconds
from ..scope import StoreScope
from .base import CheckpointStore

TOKEN_ENV = "AGENTIHOOKS_WORKER_TOKEN"  # noqa: S105 - a variable name, not a secret
RETRY_ENV = "AGENTIHOOKS_CONTROL_RETRY_SECONDS"
CHUNK = 256 * 1024
#: How long one call keeps retrying while the controller is away (long enough for a restart).
RETRY_SECONDS = 120.0
#: Statuses that mean "nothing was done, try again": a gateway without a backend, or the controller
#: unavailable / not the lease holder / the swarm not published yet.
RETRY_STATUSES = frozenset({502, 503, 504})
FIRST_WAIT = 0.25
MAX_WAIT = 5.0
#: Per attempt: connecting, and any pause between bytes while reading or writing.
TIMEOUT = httpx.Timeout(60.0, connect=10.0, pool=10.0)
#: How long a restore report (for the controller's metrics only) is retried: it never holds a worker up.
REPORT_RETRY_SECONDS = 5.0
#: While the controller stays away, how often the worker repeats that it is still retrying.
NOTICE_SECONDS = 30.0

log = logging.getLogger(__name__)


class RetryNotice:
    """Whether to say "retrying" now: once when the controller goes away, then every
    ``every`` seconds, and once when it answers again; shared by every call of the process."""

    def __init__(self, every: float = NOTICE_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.every = every
        self.clock = clock
        self._lock = threading.Lock()
        self._since: float | None = None  # when the current outage was first noticed
        self._said: float = 0.0
        self._retries = 0

    def failed(self, why: str, retry_seconds: float) -> None:
        with self._lock:
            now = self.clock()
            self._retries += 1
            if self._since is None:
                self._since = self._said = now
                log.warning(
                    "the controller cannot be reached (%s); retrying for up to %.0f s", why, retry_seconds
                )
            elif now - self._said >= self.every:
                self._said = now
                log.warning(
                    "still retrying the controller (%s): %d retries over %.0f s",
                    why,
                    self._retries,
                    now - self._since,
                )

    def answered(self) -> None:
        with self._lock:
            if self._since is None:
                return
            log.warning(
                "the controller answered again after %d retries over %.0f s",
                self._retries,
                self.clock() - self._since,
            )
            self._since, self._retries = None, 0


#: The process's notice (every client of the worker shares it).
NOTICE = RetryNotice()


def retry_seconds_from(environ: Mapping[str, str]) -> float:
    """``AGENTIHOOKS_CONTROL_RETRY_SECONDS`` (a number >= 0), or :data:`RETRY_SECONDS`."""
    raw = environ.get(RETRY_ENV, "").strip()
    if not raw:
        return RETRY_SECONDS
    try:
        value = float(raw)
    except ValueError as e:
        raise StoreError(f"{RETRY_ENV} must be a number of seconds, got {raw!r}") from e
    if value < 0:
        raise StoreError(f"{RETRY_ENV} may not be negative")
    return value


class ControlRefused(StoreError):
    """The controller refused a call; ``status`` and ``code`` come from its answer (never a token)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"the controller refused the call ({status} {code}): {message}")
        self.status = status
        self.code = code
        self.message = message


class ControlUnavailable(ControlRefused, StoreUnreachable):
    """The controller still answered ``502``/``503``/``504`` when the call's retry deadline passed."""


def _refusal(resp: httpx.Response) -> ControlRefused:
    try:
        body = resp.json()
        code, message = str(body.get("error", "")), str(body.get("message", ""))
    except (ValueError, AttributeError):
        code, message = "", resp.reason_phrase
    kind = ControlUnavailable if resp.status_code in RETRY_STATUSES else ControlRefused
    return kind(resp.status_code, code or str(resp.status_code), message)


class _Backoff:
    """Waits between attempts of one call: the product's one :class:`~..retry.Backoff` (jittered,
    growing, the server's ``Retry-After`` obeyed up to ``MAX_WAIT``), never past the call's deadline."""

    def __init__(self, retry_seconds: float, retries: int | None, sleep: Callable[[float], None]) -> None:
        self.deadline = time.monotonic() + retry_seconds
        self.retries = retries
        self.sleep = sleep
        self.attempt = 0
        self.policy = Backoff(base_delay=FIRST_WAIT, max_delay=MAX_WAIT, retry_after_cap=MAX_WAIT)

    def wait(self, hint: float | None = None) -> bool:
        """Sleep before the next attempt; False when the deadline (or the retry count) is used up."""
        left = self.deadline - time.monotonic()
        if left <= 0 or (self.retries is not None and self.attempt >= self.retries):
            return False
        self.attempt += 1
        self.sleep(min(left, self.policy.delay(self.attempt, hint)))
        return True


def _retry_after(resp: httpx.Response) -> float | None:
    return retry_after_seconds(resp.headers.get("Retry-After"))


class _Client:
    def __init__(
        self,
        control_url: str,
        execution_id: str,
        token: str,
        http: httpx.Client | None,
        *,
        retry_seconds: float = RETRY_SECONDS,
        retries: int | None = None,
        sleep: Callable[[float], None] = time.sleep,
        notice: RetryNotice | None = None,
    ) -> None:
        if not token:
            raise StoreError(f"no worker credential: {TOKEN_ENV} is empty")
        self.execution_id = execution_id
        self.http = http or httpx.Client(timeout=TIMEOUT)
        self.base = control_url.rstrip("/") + f"/v1/executions/{execution_id}"
        self.headers = {"Authorization": f"Bearer {token}"}
        self.retry_seconds = retry_seconds
        self.retries = retries
        self.sleep = sleep
        self.notice = notice or NOTICE

    def use_token(self, token: str) -> None:
        self.headers = {"Authorization": f"Bearer {token}"}

    def backoff(self) -> _Backoff:
        return _Backoff(self.retry_seconds, self.retries, self.sleep)

    def request(
        self, method: str, path: str, *, headers: dict[str, str] | None = None, **kw: Any
    ) -> httpx.Response:
        """One call, retried while the controller is away (see the module docstring).

        ``content`` may be a callable returning a fresh body, so a streamed upload can be sent again.
        The last ``502``/``503``/``504`` answer is returned once the deadline passed; a connection
        that never worked raises :class:`StoreUnreachable`.
        """
        content = kw.pop("content", None)
        backoff = self.backoff()
        while True:
            body = content() if callable(content) else content
            try:
                resp = self.http.request(
                    method, self.base + path, headers={**self.headers, **(headers or {})}, content=body, **kw
                )
            except httpx.TransportError as e:
                self.notice.failed(type(e).__name__, self.retry_seconds)
                if backoff.wait():
                    continue
                raise StoreUnreachable(f"the controller cannot be reached ({type(e).__name__})") from e
            except httpx.HTTPError as e:
                raise StoreError(f"the call to the controller failed ({type(e).__name__})") from e
            if resp.status_code not in RETRY_STATUSES:
                self.notice.answered()
                return resp
            self.notice.failed(str(resp.status_code), self.retry_seconds)
            if not backoff.wait(_retry_after(resp)):
                return resp

    @contextmanager
    def stream(self, url: str, params: dict[str, str]) -> Iterator[BinaryIO]:
        """A GET of ``url`` as a readable stream that survives the controller going away midway."""
        reader = _ResumingStream(self, url, params)
        try:
            reader.open()
            yield cast(BinaryIO, reader)
        finally:
            reader.close()


class _ResumingStream:
    """A read-only file-like view of a streamed download, re-opened where it broke off.

    A connection lost after ``offset`` bytes opens the object again (with the call's backoff and
    deadline) and skips ``offset`` bytes of the new answer.
    """

    def __init__(self, client: _Client, url: str, params: dict[str, str]) -> None:
        self._c, self._url, self._params = client, url, params
        self._backoff = client.backoff()
        self._cm: AbstractContextManager[httpx.Response] | None = None
        self._chunks: Iterator[bytes] = iter(())
        self._buf = b""
        self._done = False
        self.offset = 0  # bytes handed to the reader so far

    def open(self) -> None:
        """Open (or re-open) the download and skip what was already read."""
        while True:
            self.close()
            cm = self._c.http.stream("GET", self._url, params=self._params, headers=self._c.headers)
            try:
                resp = cm.__enter__()
            except httpx.TransportError as e:
                self._c.notice.failed(type(e).__name__, self._c.retry_seconds)
                if self._backoff.wait():
                    continue
                raise StoreUnreachable(f"the controller cannot be reached ({type(e).__name__})") from e
            except httpx.HTTPError as e:
                raise StoreError(f"the call to the controller failed ({type(e).__name__})") from e
            self._cm = cm
            if resp.status_code not in RETRY_STATUSES:
                self._c.notice.answered()
            if resp.status_code == 200:
                break
            if resp.status_code in RETRY_STATUSES:
                self._c.notice.failed(str(resp.status_code), self._c.retry_seconds)
                if self._backoff.wait(_retry_after(resp)):
                    continue
            with suppress(httpx.HTTPError):
                resp.read()
            self.close()
            if resp.status_code == 404:
                raise ObjectMissing("no such object")
            raise _refusal(resp)
        self._chunks = resp.iter_bytes(CHUNK)
        self._buf, self._done = b"", False
        skip = self.offset
        while skip > 0:
            chunk = self._next()
            if chunk is None:  # resumed below the earlier offset: the object changed under us
                raise StoreError("the object ended early when the download was resumed")
            if len(chunk) > skip:
                self._buf = chunk[skip:]
                break
            skip -= len(chunk)

    def _next(self) -> bytes | None:
        try:
            return next(self._chunks)
        except StopIteration:
            return None

    def _fill(self) -> None:
        """Read one more chunk into the buffer; re-open the download when the connection broke."""
        while True:
            try:
                chunk = self._next()
            except httpx.TransportError as e:
                self._c.notice.failed(type(e).__name__, self._c.retry_seconds)
                if not self._backoff.wait():
                    raise StoreUnreachable(f"the download broke off ({type(e).__name__})") from e
                self.open()
                continue
            if chunk is None:
                self._done = True
            else:
                self._buf += chunk
            return

    def read(self, n: int = -1) -> bytes:
        while not self._done and (n is None or n < 0 or len(self._buf) < n):
            self._fill()
        if n is None or n < 0:
            out, self._buf = self._buf, b""
        else:
            out, self._buf = self._buf[:n], self._buf[n:]
        self.offset += len(out)
        return out

    def close(self) -> None:
        cm, self._cm = self._cm, None
        if cm is not None:
            with suppress(httpx.HTTPError):
                cm.__exit__(None, None, None)


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
        retry_seconds: float = RETRY_SECONDS,
        retries: int | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._c = _Client(
            control_url, execution_id, token, http, retry_seconds=retry_seconds, retries=retries, sleep=sleep
        )

    @classmethod
    def from_env(cls, control_url: str, execution_id: str, environ: Mapping[str, str]) -> RemoteStore:
        return cls(
            control_url,
            execution_id,
            environ.get(TOKEN_ENV, ""),
            retry_seconds=retry_seconds_from(environ),
        )

    def __repr__(self) -> str:
        return "RemoteStore()"

    @staticmethod
    def _params(scope: StoreScope, **extra: str) -> dict[str, str]:
        return {
            "swarm": scope.swarm,
            "task_id": scope.task_id,
            "task_generation": str(scope.task_generation),
            **({"namespace": scope.namespace} if scope.namespace is not None else {}),
            **extra,
        }

    def open_read(self, scope: StoreScope, key: str) -> AbstractContextManager[BinaryIO]:
        return self._open(scope, key)

    def _open(self, scope: StoreScope, key: str) -> AbstractContextManager[BinaryIO]:
        c = self._c
        return c.stream(c.base + "/checkpoint-store/object", self._params(scope, key=key))

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
        retry_seconds: float = RETRY_SECONDS,
        retries: int | None = None,
        sleep: Callable[[float], None] = time.sleep,
        quick_progress: bool = False,
    ) -> None:
        self._c = _Client(
            control_url, execution_id, token, http, retry_seconds=retry_seconds, retries=retries, sleep=sleep
        )
        #: Progress retried briefly only (a worker whose store is not the controller: its captures go
        #: on while the controller is away, and the next one reports again).
        self.quick_progress = quick_progress
        self._quick = _Client(
            control_url,
            execution_id,
            token,
            self._c.http,
            retry_seconds=min(retry_seconds, REPORT_RETRY_SECONDS),
            retries=retries,
            sleep=sleep,
        )

    def _post(self, path: str, body: dict[str, Any], *, quick: bool = False) -> dict[str, Any]:
        resp = (self._quick if quick else self._c).request("POST", path, json=body)
        if resp.status_code != 200:
            raise _refusal(resp)
        data = resp.json()
        return data if isinstance(data, dict) else {}

    def report_outcome(self, outcome: RestoreOutcome) -> None:
        if outcome.execution_id != self._c.execution_id:
            raise CheckpointError("an outcome is reported only for this worker's own execution")
        self._post("/outcome", outcome.model_dump(mode="json"))

    def report_progress(
        self, execution_id: str, session_id: str | None, watermark: int | None, *, final: bool = False
    ) -> None:
        """The session and archive watermark; ``final`` when the capture was taken after the harness
        exited, so the fence knows nothing lies past it (a drained worker reports this before it exits)."""
        if execution_id != self._c.execution_id:
            raise CheckpointError("progress is reported only for this worker's own execution")
        quick = self.quick_progress
        if session_id is not None:
            self._post("/session", {"session_id": session_id}, quick=quick)
        if watermark is not None:
            body: dict[str, Any] = {"watermark": watermark} | ({"final": True} if final else {})
            self._post("/watermark", body, quick=quick)

    def exchange_credential(self) -> str:
        """Trade this reporter's credential for a new one (``POST .../credential``, once) and use the new
        one from now on; returns it. Raises :class:`ControlRefused` when refused."""
        data = self._post("/credential", {})
        token = data.get("token")
        if not isinstance(token, str) or not token:
            raise StoreError("the controller's answer holds no credential")
        self._c.use_token(token)
        self._quick.use_token(token)
        return token

    def renew_lease(self, *, session_id: str | None = None, watermark: int | None = None) -> dict[str, Any]:
        """Renew the attempt's worker lease (``POST .../lease``), with the progress that is due.

        Retried briefly only (:data:`REPORT_RETRY_SECONDS`): the worker's lease loop tries again soon
        anyway. Raises :class:`ControlRefused` with code ``fenced`` (410) once the attempt is fenced."""
        body: dict[str, Any] = {}
        if session_id is not None:
            body["session_id"] = session_id
        if watermark is not None:
            body["watermark"] = watermark
        return self._post("/lease", body, quick=True)

    def report_refusal(self, execution_id: str, reason: str, message: str) -> None:
        """The restore was refused (``POST .../restore-refusal``): the seat then waits for a relaunch.

        Retried like every call; raises when the controller refused it or stayed away.
        """
        if execution_id != self._c.execution_id:
            raise CheckpointError("a refusal is reported only for this worker's own execution")
        self._post("/restore-refusal", {"execution_id": execution_id, "reason": reason, "message": message})

    def report_restore(
        self, result: str, *, reason: str | None = None, restore_seconds: float | None = None
    ) -> bool:
        """The restore for the controller's metrics (``POST .../restore-report``): ``native``,
        ``reconstructed``, ``fresh`` or ``refused`` with its ``reason``, and the seconds the boot took.

        Best effort, briefly retried: never raises; False when it was not counted (an older controller
        without the route answers 404, an unreachable one is given up after a few seconds).
        """
        body: dict[str, Any] = {"result": result}
        if reason is not None:
            body["reason"] = reason
        if restore_seconds is not None:
            body["restore_seconds"] = round(max(0.0, restore_seconds), 3)
        try:
            resp = self._quick.request("POST", "/restore-report", json=body)
        except CheckpointError:
            return False
        return resp.status_code == 200
