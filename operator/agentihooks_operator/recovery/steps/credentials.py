"""Worker credentials: minted per attempt, stored only as a sha256, revoked by the fence.

The token itself goes into the attempt's Secret (through the launch plan) and
is never stored or logged here. Checks compare digests in constant time.
"""

from __future__ import annotations

import hashlib
import hmac

from ..context import Ctx
from ..errors import RecoveryRefused
from ..outcomes import check_execution
from ..store.records import FenceRecord
from .launching import mint


def mint_credential(ctx: Ctx, execution_id: str) -> str:
    """A new credential for a current, unfenced attempt (replacing the previous one)."""
    check_execution(execution_id)
    token, digest = mint()
    answer = ctx.w.run("credential", {"execution_id": execution_id, "cred_hash": digest})
    if not answer["ok"]:
        raise RecoveryRefused("this attempt is not the seat's current attempt", reason="not_current")
    return token


def exchange_credential(ctx: Ctx, execution_id: str, offered_digest: str) -> str:
    """The attempt's credential replaced by a new one, only while ``offered_digest`` (the caller's,
    checked in constant time before) is the stored one: the credential the Pod was started with
    trades once; afterwards it matches nothing. Returns the new token (only its sha256 is stored)."""
    check_execution(execution_id)
    token, digest = mint()
    ctx.point("before:exchange")
    answer = ctx.w.run(
        "exchange", {"execution_id": execution_id, "offered": offered_digest, "cred_hash": digest}
    )
    ctx.point("after:exchange")
    if not answer["ok"]:
        if answer.get("refused") == "not_bootstrap":
            raise RecoveryRefused("this credential was already exchanged", reason="exchanged")
        raise RecoveryRefused("this attempt is not the seat's current attempt", reason="not_current")
    return token


def check_credential(ctx: Ctx, execution_id: str, token: str) -> bool:
    """True only for the attempt's live credential; every failure looks the same to the caller."""
    if not isinstance(token, str) or not token:
        return False
    return check_digest(ctx, execution_id, hashlib.sha256(token.encode()).hexdigest())


def _same(offered: str, stored: object) -> bool:
    """Constant time, also when nothing is stored."""
    o = offered.encode()
    if stored is None:
        hmac.compare_digest(o, o)
        return False
    return hmac.compare_digest(o, stored if isinstance(stored, bytes) else str(stored).encode())


def fenced_reason(ctx: Ctx, execution_id: str, digest: str) -> str | None:
    """The attempt's fence reason when ``digest`` is the credential its fence revoked, else ``None``."""
    if not isinstance(digest, str) or not digest or not isinstance(execution_id, str):
        return None
    k = ctx.w.keys
    pipe = ctx.w.client.pipeline(transaction=False)
    pipe.hget(k.fenced_credentials, execution_id)
    pipe.hget(k.attempt_fences, execution_id)
    stored, fence = pipe.execute()
    ctx.w.trip()
    if not _same(digest, stored) or fence is None:
        return None
    return FenceRecord.model_validate_json(fence).reason


def check_digest(ctx: Ctx, execution_id: str, digest: str) -> bool:
    """:func:`check_credential` for a caller known by its credential's sha256 hex (a request another
    replica forwarded with an assertion instead of the token)."""
    if not isinstance(digest, str) or not digest or not isinstance(execution_id, str):
        return False
    ctx.w.trip()
    return _same(digest, ctx.w.client.hget(ctx.w.keys.worker_credentials, execution_id))
