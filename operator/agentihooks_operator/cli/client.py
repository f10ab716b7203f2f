"""The CLI's HTTP client: one call per command, every failure turned into one clear line.

:class:`CliError` carries the line and the exit code; commands never let a
traceback reach the terminal. The token is sent as a bearer header and never
printed, not even in an error.
"""

from __future__ import annotations

import ssl
import time
from dataclasses import dataclass
from typing import Any

import httpx

EXIT_REFUSED = 1
EXIT_UNREACHABLE = 3


class CliError(Exception):
    """A failure to show as ``error: <line>`` with exit code ``code``."""

    def __init__(self, line: str, code: int = EXIT_REFUSED) -> None:
        super().__init__(line)
        self.line = line
        self.code = code


@dataclass
class Answer:
    status: int
    body: Any


def _message(resp: httpx.Response) -> tuple[str, str]:
    try:
        body = resp.json()
        return str(body.get("error", "")), str(body.get("message", ""))
    except (ValueError, AttributeError):
        return "", resp.reason_phrase or f"HTTP {resp.status_code}"


#: 404 codes whose name the CLI can read back from its own request path (segment after ``part``).
_NAMED = {"unknown_swarm": ("swarms", "swarm"), "unknown_seat": ("seats", "seat")}


def _path_part(resp: httpx.Response, part: str) -> str | None:
    try:
        segments = resp.request.url.path.split("/")
    except RuntimeError:  # a response built without its request
        return None
    if part in segments and segments.index(part) + 1 < len(segments):
        return segments[segments.index(part) + 1] or None
    return None


#: Why a 401 happened, by the API's ``error`` code; any other code means an unknown token.
_UNAUTHENTICATED = {
    "missing_credential": "no token was sent: pass --token or set AGENTIHOOKS_TOKEN",
    "malformed_credential": "it is not a bearer token",
}
_UNKNOWN = "unknown or revoked token"


class ControlClient:
    def __init__(
        self, url: str | None, token: str | None, *, timeout: float | None = 30.0, ca_file: str | None = None
    ) -> None:
        if not url:
            raise CliError(
                "no control URL: pass --control-url or set AGENTIHOOKS_CONTROL_URL", EXIT_UNREACHABLE
            )
        if not url.startswith(("http://", "https://")):
            raise CliError(
                f"the control URL must start with http:// or https:// (got {url!r})", EXIT_UNREACHABLE
            )
        headers = {"Accept": "application/json", "User-Agent": "agentihooks-cli"}
        if token:
            headers["Authorization"] = f"Bearer {token.strip()}"
        self.url = url.rstrip("/")
        self.http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout, verify=_verify(ca_file))

    def close(self) -> None:
        self.http.close()

    def fail(self, resp: httpx.Response) -> CliError:
        code, message = _message(resp)
        if resp.status_code == 401:
            # Authentication failed: the controller does not know this token at all. Never worded
            # like a 403 (a known token without the right), whatever code the API puts in the body.
            return CliError(
                f"the controller did not accept the token ({_UNAUTHENTICATED.get(code, _UNKNOWN)})"
            )
        if resp.status_code == 403:
            return CliError("forbidden_scope: this token may not do that")
        if resp.status_code == 404 and code in _NAMED:
            # The API never echoes a name back; the CLI knows which one it asked for.
            part, what = _NAMED[code]
            named = _path_part(resp, part)
            if named:
                return CliError(f"unknown {what}: {named}")
        if resp.status_code in (404, 409, 400, 413):
            return CliError(message or code)
        if resp.status_code == 503:
            return CliError(
                f"the controller is not ready: {message or code}; retry shortly", EXIT_UNREACHABLE
            )
        return CliError(f"the controller answered {resp.status_code}: {message or code}")

    def unreachable(self, e: httpx.HTTPError) -> CliError:
        tls = _tls_failure(e)
        if tls is not None:
            return CliError(f"TLS: the controller at {self.url} {tls}", EXIT_UNREACHABLE)
        return CliError(f"cannot reach the controller at {self.url} ({type(e).__name__})", EXIT_UNREACHABLE)

    def call(self, method: str, path: str, *, ok: tuple[int, ...] = (200,), **kw: Any) -> Answer:
        """One request; an operator that has just started and does not serve the swarm yet (``503
        swarm_not_published``, for about a second) is asked again after its ``Retry-After`` (at most
        :data:`NOT_PUBLISHED_TRIES` times: every request the CLI sends may be repeated safely)."""
        for attempt in range(NOT_PUBLISHED_TRIES):
            try:
                resp = self.http.request(method, path, **kw)
            except (httpx.HTTPError, httpx.InvalidURL, ValueError) as e:
                if isinstance(e, httpx.HTTPError):
                    raise self.unreachable(e) from e
                raise CliError(f"invalid request: {type(e).__name__}") from e
            if not _not_published(resp) or attempt == NOT_PUBLISHED_TRIES - 1:
                break
            time.sleep(_retry_after(resp))
        if resp.status_code not in ok:
            raise self.fail(resp)
        try:
            return Answer(resp.status_code, resp.json())
        except ValueError as e:
            raise CliError(f"the controller answered {resp.status_code} without JSON") from e


#: How often a request answered ``503 swarm_not_published`` is sent in all.
NOT_PUBLISHED_TRIES = 4


def _not_published(resp: httpx.Response) -> bool:
    if resp.status_code != 503:
        return False
    try:
        body = resp.json()
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("error") == "swarm_not_published"


def _retry_after(resp: httpx.Response) -> float:
    """The answer's ``Retry-After`` in seconds, kept between 0.2 and 5."""
    try:
        return min(5.0, max(0.2, float(resp.headers.get("Retry-After", "1"))))
    except ValueError:
        return 1.0


def _verify(ca_file: str | None) -> ssl.SSLContext | bool:
    """The system's CAs, or those of ``ca_file`` (``--ca-file``: an ingress with a private CA)."""
    if not ca_file:
        return True
    try:
        return ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as e:
        raise CliError(
            f"--ca-file {ca_file!r} is not a readable PEM bundle of CAs ({e})", EXIT_UNREACHABLE
        ) from e


def _tls_failure(e: BaseException) -> str | None:
    """What went wrong in the TLS handshake, in words, or ``None`` when it was not TLS."""
    seen: BaseException | None = e
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            why = seen.verify_message or "certificate verify failed"
            return (
                f"presented a certificate that cannot be verified ({why}); give the CA that signed it "
                "with --ca-file (or AGENTIHOOKS_CA_FILE), or check the URL's host name"
            )
        if isinstance(seen, ssl.SSLError):
            return f"failed the TLS handshake ({seen.reason or seen}): is it served over https at that port?"
        seen = seen.__cause__ or seen.__context__
    text = str(e)
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return (
            "presented a certificate that cannot be verified; give its CA with --ca-file "
            "(or AGENTIHOOKS_CA_FILE)"
        )
    if "SSL" in text:
        return f"failed the TLS handshake ({text}): is it served over https at that port?"
    return None
