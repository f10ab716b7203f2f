"""Who is calling: bearer tokens compared as sha256 digests in constant time.

Three kinds of callers exist. The *operator* holds the deployment's operator
token; a *master* holds the credential stored in the Secret its Swarm names,
bound to exactly one agent name; a *worker* holds the credential minted for its
execution (checked by the recovery core, revoked by the fence). Tokens are
hashed as soon as they are read; only digests are kept or compared, and no
token or digest is ever logged or put in an answer.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from ..errors import HttpProblem

#: RFC 6750 ``b64token`` characters; anything else in the header is malformed.
_TOKEN = re.compile(r"^[A-Za-z0-9\-._~+/]+=*$")
MAX_TOKEN = 4096


def sha256_hex(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def same_digest(offered_hex: str, stored_hex: str | None) -> bool:
    """Constant-time comparison of two hex digests; a missing stored digest never matches."""
    if stored_hex is None:
        hmac.compare_digest(offered_hex.encode(), offered_hex.encode())
        return False
    return hmac.compare_digest(offered_hex.encode(), stored_hex.encode())


def _malformed() -> HttpProblem:
    return HttpProblem(
        401,
        "malformed_credential",
        "the Authorization header must be 'Bearer <token>'",
        headers={"WWW-Authenticate": 'Bearer error="invalid_request"'},
    )


def missing() -> HttpProblem:
    return HttpProblem(
        401,
        "missing_credential",
        "this route needs a bearer token in the Authorization header",
        headers={"WWW-Authenticate": "Bearer"},
    )


def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header; ``None`` when there is no header."""
    if header is None:
        return None
    parts = header.strip().split(" ")
    if len(parts) != 2 or parts[0].lower() != "bearer":
        raise _malformed()
    token = parts[1]
    if not token or len(token) > MAX_TOKEN or not _TOKEN.fullmatch(token):
        raise _malformed()
    return token


def require_token(header: str | None) -> str:
    token = bearer_token(header)
    if token is None:
        raise missing()
    return token


CallerKind = Literal["operator", "master", "worker"]


@dataclass(frozen=True)
class Caller:
    """An authenticated caller: its kind and, for a master, the one agent its credential is bound to."""

    kind: CallerKind
    agent: str | None = None
    execution_id: str | None = None

    @property
    def decided_by(self) -> str:
        """What the recovery core records as the decider: ``operator`` or the master's agent."""
        return "operator" if self.kind == "operator" else str(self.agent)


def is_operator(token_hex: str, operator_hash: str | None) -> bool:
    return same_digest(token_hex, operator_hash)


def master_agent(token_hex: str, masters: Mapping[str, str | None]) -> str | None:
    """The agent whose credential digest equals ``token_hex``; every master is compared."""
    found = None
    for agent, digest in masters.items():
        if same_digest(token_hex, digest) and found is None:
            found = agent
    return found
