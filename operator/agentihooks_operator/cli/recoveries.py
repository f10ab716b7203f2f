"""``agentihooks swarm NAME recoveries | recovery-token | resume-recovery``: answering held recoveries.

A held recovery waits at a step only the operator can observe (see
docs/operations.md, "A recovery is held"). ``recoveries`` lists them (call,
seat, step, since); ``recovery-token CALL`` issues a resume token (printed
once, never stored by the CLI); ``resume-recovery CALL --token T --observed
STEP=applied|not_applied`` answers. A refusal prints its code and, for the
``observed_*`` codes, each step with what it accepts, and exits 1.
"""

from __future__ import annotations

import re
import time
from typing import Annotated, Any

import typer

from .client import EXIT_REFUSED, CliError
from .output import Format, JsonFlag, OutputOption, chosen, emit
from .swarm import _client, _swarm_path, run

_CALL = re.compile(r"^rc-[0-9a-f]{16}$")
_VALUES = ("applied", "not_applied")


def _call(value: str) -> str:
    if not _CALL.fullmatch(value):
        raise CliError(f"not a held recovery call id: {value!r} (expected rc-<16 hex>)")
    return value


def _since(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


def parse_observed(items: list[str]) -> dict[str, str]:
    """``STEP=applied|not_applied`` entries as a dict; a malformed or repeated entry is an error."""
    out: dict[str, str] = {}
    for item in items:
        step, sep, value = item.partition("=")
        if not sep or not step or value not in _VALUES:
            raise CliError(f"--observed takes STEP=applied or STEP=not_applied (got {item!r})")
        if step in out:
            raise CliError(f"--observed names {step} twice")
        out[step] = value
    return out


def _refusal(body: dict[str, Any]) -> CliError:
    lines = [f"{body.get('error')}: {body.get('message')}"]
    for s in (body.get("state") or {}).get("steps", []):
        why = s.get("reason") or s.get("status") or ""
        lines.append(f"  {s.get('step')}: {why}; accepts {', '.join(s.get('accepts') or []) or 'nothing'}")
    return CliError("\n".join(lines), EXIT_REFUSED)


def _held_text(b: dict[str, Any]) -> str:
    rows = b.get("recoveries", [])
    if not rows:
        return "no held recoveries"
    lines = [f"{'CALL':<20} {'SEAT':<16} {'STEP':<16} SINCE"]
    lines += [f"{r['call']:<20} {r['seat']:<16} {r['step']:<16} {_since(int(r['since_ms']))}" for r in rows]
    return "\n".join(lines)


def recoveries(ctx: typer.Context, output: OutputOption = Format.text, as_json: JsonFlag = False) -> None:
    """List held recoveries: call, seat, step, since."""

    def body() -> None:
        fmt = chosen(output, as_json)
        b = _client(ctx).call("GET", f"{_swarm_path(ctx)}/recoveries").body
        emit(b, fmt, lambda _: _held_text(b))

    run(body, ctx)


def recovery_token(
    ctx: typer.Context,
    call: Annotated[str, typer.Argument(help="The held recovery's call id.")],
    output: OutputOption = Format.text,
) -> None:
    """Issue a resume token for CALL (earlier tokens stop working); printed once."""

    def body() -> None:
        b = _client(ctx).call("POST", f"/v1/recoveries/{_call(call)}/token").body
        emit(b, output, lambda _: str(b["resume_token"]))

    run(body, ctx)


def resume_recovery(
    ctx: typer.Context,
    call: Annotated[str, typer.Argument(help="The held recovery's call id.")],
    token: Annotated[str, typer.Option("--token", help="The latest resume token of CALL.")],
    observed: Annotated[
        list[str] | None,
        typer.Option("--observed", help="STEP=applied|not_applied (repeat for several steps)."),
    ] = None,
    output: OutputOption = Format.text,
) -> None:
    """Resume CALL with what you observed at the broker."""

    def body() -> None:
        payload = {"resume_token": token, "observed": parse_observed(observed or [])}
        a = _client(ctx).call(
            "POST", f"/v1/recoveries/{_call(call)}/resume", ok=(200, 400, 403, 404, 409), json=payload
        )
        b = a.body
        if a.status != 200:
            raise _refusal(b)
        emit(b, output, lambda _: _progress_text(b))
        if b.get("error"):
            raise CliError(f"{b['error']}: the resume stopped on an internal error; its record was dropped")
        if b.get("resume_token") and output in (Format.text, Format.wide):
            typer.echo(f"still {b['status']}: resume {b['call']} again with --token {b['resume_token']}")

    run(body, ctx)


def _progress_text(b: dict[str, Any]) -> str:
    lines = []
    for s in b.get("progress", []):
        kept = " (kept)" if s.get("resumed") == "kept" else ""
        lines.append(f"{s['path']:<16} {s['status']}{kept}")
    return "\n".join([*lines, b.get("summary", "")])


def register(app: typer.Typer) -> None:
    """Add the held-recovery commands to the ``swarm NAME`` group."""
    app.command("recoveries")(recoveries)
    app.command("recovery-token")(recovery_token)
    app.command("resume-recovery")(resume_recovery)
