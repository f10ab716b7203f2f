"""``agentihooks swarm NAME ...``: restore decisions, relaunch, status, pause/unpause, checkpoints, events.

``restore-decision`` records the choice for the controller's next recovery
pass (the controller applies it under its lease); ``--now`` posts it to the
execution's decision route instead, applied at once by the lease holder.
``relaunch`` launches a replacement that refused its restore again, once its
cause is fixed (applied at once by the lease holder).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from enum import StrEnum
from typing import Annotated, Any

import httpx
import typer
from agentihooks_checkpoint.retry import Backoff
from httpx_sse import connect_sse

from . import complete, namespace, reach, render
from .client import CliError, ControlClient
from .output import Format, JsonFlag, OutputOption, chosen, emit, emit_item

app = typer.Typer(
    help="Recovery of one Swarm: decisions, status, pause, checkpoints, events.", no_args_is_help=True
)


class Choice(StrEnum):
    resume = "resume"
    fresh = "fresh"


#: How long ``events --follow`` keeps reconnecting a broken stream before it gives up.
RECONNECT_S = 60.0
_BACKOFF = Backoff(base_delay=0.25, max_delay=4.0)

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")


def _name(kind: str, value: str) -> str:
    if not _NAME.fullmatch(value):
        raise CliError(f"not a {kind} name: {value!r}")
    return value


def _client(ctx: typer.Context) -> ControlClient:
    return reach.control_client(ctx.find_object(dict) or {})


def _swarm(ctx: typer.Context) -> str:
    obj = ctx.find_object(dict) or {}
    return _name("swarm", str(obj["swarm"]))


def _namespace(ctx: typer.Context) -> str | None:
    obj = ctx.find_object(dict) or {}
    return namespace.resolve(obj.get("namespace"))


def _swarm_path(ctx: typer.Context) -> str:
    """``/v1/namespaces/<ns>/swarms/<name>`` (or ``/v1/swarms/<name>`` when no namespace is known)."""
    ns = _namespace(ctx)
    obj = ctx.find_object(dict)
    if obj is not None:  # said with an unknown swarm: which namespace was asked, and why that one
        flag = None if obj.get("namespace_from_env") else obj.get("namespace")
        obj["where"] = (ns, namespace.source(flag))
    return namespace.swarm_path(_swarm(ctx), ns)


def run(fn: Callable[[], None], ctx: typer.Context | None = None) -> None:
    """Run a command body: a :class:`CliError` becomes one ``error:`` line and its exit code; an
    unknown swarm also names the namespace asked and where it came from (kubectl's wrong-context trap)."""
    try:
        fn()
    except CliError as e:
        line = e.line
        where = ((ctx.find_object(dict) or {}) if ctx is not None else {}).get("where")
        if where and where[0] and line.startswith("unknown swarm"):  # a name alone was looked up everywhere
            line = f"{line} in namespace {where[0]} (from {where[1]})"
        typer.echo(f"error: {line}", err=True)
        raise typer.Exit(e.code) from None


NamespaceOption = Annotated[
    str | None,
    typer.Option(
        "-n",
        "--namespace",
        help="The Swarm's namespace (default: $AGENTIHOOKS_NAMESPACE, else the kubeconfig context's).",
        show_default=False,
    ),
]


@app.callback()
def swarm(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The Swarm's name.", autocompletion=complete.swarms)],
    ns: NamespaceOption = None,
) -> None:
    """Act on the Swarm NAME (in the namespace -n names)."""
    obj = ctx.ensure_object(dict)
    obj["swarm"] = name
    if ns is not None:
        obj["namespace"], obj["namespace_from_env"] = ns, False


def _seat_path(ctx: typer.Context, seat: str, tail: str) -> str:
    return f"{_swarm_path(ctx)}/seats/{_name('seat', seat)}/{tail}"


@app.command("restore-decision")
def restore_decision(  # noqa: PLR0917 (typer reads each option from a parameter)
    ctx: typer.Context,
    seat: Annotated[
        str,
        typer.Argument(
            help="The seat whose fenced attempt waits, e.g. eng-2.", autocompletion=complete.seats
        ),
    ],
    choice: Annotated[Choice, typer.Argument(help="resume (from the newest usable checkpoint) or fresh.")],
    agent: Annotated[
        str | None, typer.Option(envvar="AGENTIHOOKS_AGENT", help="The master agent you act for.")
    ] = None,
    now: Annotated[bool, typer.Option("--now", help="Apply at once through the execution's route.")] = False,
    output: OutputOption = Format.text,
) -> None:
    """Choose how SEAT returns: resume or fresh."""

    def body() -> None:
        c = _client(ctx)
        if now:
            _decide_now(ctx, c, seat, choice.value, agent, output)
            return
        payload: dict[str, Any] = {"choice": choice.value}
        if agent:
            payload["agent"] = agent
        a = c.call("POST", _seat_path(ctx, seat, "restore-request"), ok=(200, 202), json=payload)
        b = a.body
        if a.status == 202:
            said = (
                f"recorded: {choice.value} for seat {seat} (execution {b['execution_id']}); "
                "the controller applies it under its lease on its next recovery pass"
            )
        else:
            said = _decided(seat, b, "already accepted")
        emit(b, output, lambda _: said)

    run(body, ctx)


def _decided(seat: str, b: dict[str, Any], what: str) -> str:
    ckpt = f", checkpoint {b['checkpoint']}" if b.get("checkpoint") else ""
    return f"{what}: {b.get('decision')} for seat {seat} -> replacement {b.get('replacement')}{ckpt}"


def _decide_now(  # noqa: PLR0917 (the command's parsed arguments, passed on)
    ctx: typer.Context, c: ControlClient, seat: str, choice: str, agent: str | None, output: Format
) -> None:
    """Post the choice for the seat's waiting attempt (its card's), or for its current one when no card
    waits: the controller is the one to refuse (and log its refusal line), never this CLI alone."""
    status = c.call("GET", f"{_swarm_path(ctx)}/status").body
    row = next((s for s in status.get("seats", []) if s.get("seat") == seat), None)
    if row is None:
        raise CliError(f"unknown seat: {seat}")
    card = next((h for h in status.get("handoffs", []) if h.get("seat") == seat), None)
    execution = card["execution_id"] if card is not None else row.get("execution_id")
    if not execution:
        raise CliError("no recovery decision is pending for this attempt")
    recovering = card is not None and card.get("binding") == "recovering"
    payload = {"choice": choice, "agent": agent or "operator"}
    try:
        a = c.call("POST", f"/v1/executions/{execution}/restore-decision", ok=(200, 202), json=payload)
    except CliError as e:
        if recovering:  # the controller's refusal, said with what the card showed
            raise CliError(
                f"seat {seat} is still recovering: its failed attempt is being released and no decision "
                "can be taken yet; read status again shortly",
                e.code,
            ) from e
        raise
    if a.status == 202:
        said = f"recorded: {choice} for seat {seat}; this controller replica does not hold the lease"
    else:
        said = _decided(seat, a.body, "replayed" if a.body.get("replayed") else "accepted")
    emit(a.body, output, lambda _: said)


@app.command()
def relaunch(  # noqa: PLR0917 (typer reads each option from a parameter)
    ctx: typer.Context,
    seat: Annotated[
        str,
        typer.Argument(
            help="The seat whose replacement refused its restore, e.g. eng-2.", autocompletion=complete.seats
        ),
    ],
    execution: Annotated[
        str | None,
        typer.Option(
            "--execution", help="The refused attempt meant (as its card names it); default: the seat's."
        ),
    ] = None,
    fresh: Annotated[
        bool,
        typer.Option("--fresh", help="Start the next generation fresh instead (the checkpoint is unusable)."),
    ] = False,
    agent: Annotated[
        str | None, typer.Option(envvar="AGENTIHOOKS_AGENT", help="The master agent you act for.")
    ] = None,
    output: OutputOption = Format.text,
) -> None:
    """Launch SEAT's refused replacement again as its next generation, once the cause is fixed.

    The same directive (checkpoint, continuity, session, watermark) restores from the same fenced
    attempt; asking again for the same refused attempt answers the same relaunch.
    """

    def body() -> None:
        payload: dict[str, Any] = {}
        if execution:
            payload["execution_id"] = execution
        if fresh:
            payload["fresh"] = True
        if agent:
            payload["agent"] = agent
        b = _client(ctx).call("POST", _seat_path(ctx, seat, "relaunch"), json=payload).body
        what = "already relaunched" if b.get("replayed") else "relaunched"
        kind = ((b.get("directive") or {}).get("recovery")) or "-"
        said = (
            f"{what}: seat {seat}: {b.get('refused')} refused its restore ({b.get('reason')}); "
            f"generation {b.get('generation')} is {b.get('replacement')} ({kind})"
        )
        emit(b, output, lambda _: said)

    run(body, ctx)


@app.command("confirm-stopped")
def confirm_stopped(
    ctx: typer.Context,
    seat: Annotated[
        str,
        typer.Argument(
            help="The seat whose fenced attempt is known to have stopped.", autocompletion=complete.seats
        ),
    ],
    execution: Annotated[
        str | None,
        typer.Option(
            "--execution", help="The fenced attempt meant (as its card names it); default: the seat's."
        ),
    ] = None,
    output: OutputOption = Format.text,
) -> None:
    """Confirm (operator only) that SEAT's fenced attempt has stopped, e.g. its node is known dead and
    gone: its replacement is launched at the next pass instead of after the attempt's worker lease.

    Like ``kubectl delete pod --force``: only when you know the old agent no longer runs; otherwise
    two agents may work the seat until its lease runs out. The controller logs who confirmed it.
    """

    def body() -> None:
        payload: dict[str, Any] = {"execution_id": execution} if execution else {}
        b = _client(ctx).call("POST", _seat_path(ctx, seat, "confirm-stopped"), json=payload).body
        what = "already confirmed" if b.get("replayed") else "confirmed"
        said = (
            f"{what}: seat {seat}: {b.get('execution_id')} has stopped; its replacement no longer waits "
            f"(it would have until {render.when(b.get('waited_until_ms'))})"
        )
        emit(b, output, lambda _: said)

    run(body, ctx)


@app.command()
def status(
    ctx: typer.Context,
    output: OutputOption = Format.text,
    as_json: JsonFlag = False,
    wide: Annotated[bool, typer.Option("--wide", hidden=True, help="The same as -o wide.")] = False,
) -> None:
    """Seats, the pause switch and the handoff cards (the default fits 120 columns; -o wide cuts
    nothing; the cards are under handoffs in -o json)."""

    def body() -> None:
        fmt = chosen(Format.wide if wide and output is Format.text else output, as_json)
        b = _client(ctx).call("GET", f"{_swarm_path(ctx)}/status").body
        emit(b, fmt, lambda w: render.status_text(b, wide=w))

    run(body, ctx)


def _switch(ctx: typer.Context, verb: str, output: Format) -> None:
    def body() -> None:
        b = _client(ctx).call("POST", f"{_swarm_path(ctx)}/{verb}").body
        state = "paused" if b.get("paused") else "not paused"
        emit(b, output, lambda _: f"swarm {b.get('swarm')}: restore automation {state}")

    run(body, ctx)


@app.command()
def pause(ctx: typer.Context, output: OutputOption = Format.text) -> None:
    """Every new failure waits for an explicit decision (operator token only)."""
    _switch(ctx, "pause", output)


@app.command()
def unpause(ctx: typer.Context, output: OutputOption = Format.text) -> None:
    """Let the controller resume natively on its own again (operator token only)."""
    _switch(ctx, "unpause", output)


@app.command()
def checkpoints(
    ctx: typer.Context,
    seat: Annotated[
        str, typer.Argument(help="The seat whose task's checkpoints to list.", autocompletion=complete.seats)
    ],
    output: OutputOption = Format.text,
    as_json: JsonFlag = False,
) -> None:
    """Checkpoints of SEAT's task, newest first."""

    def body() -> None:
        fmt = chosen(output, as_json)
        b = _client(ctx).call("GET", _seat_path(ctx, seat, "checkpoints")).body
        emit(b, fmt, lambda _: render.checkpoints_text(b))

    run(body, ctx)


@app.command()
def events(  # noqa: PLR0917 (typer reads each option from a parameter)
    ctx: typer.Context,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new events.")] = False,
    count: Annotated[int, typer.Option(min=1, max=1000, help="How many recent events.")] = 50,
    limit: Annotated[
        int | None, typer.Option(min=1, help="With --follow: stop after this many events.")
    ] = None,
    output: OutputOption = Format.text,
    as_json: JsonFlag = False,
) -> None:
    """Recent fence, recovery and outcome events (-o json: one JSON object per line; -o yaml: one
    document each)."""
    shown = [0]

    def show(e: dict[str, Any]) -> None:
        emit_item(e, fmt, render.event_line, first=not shown[0])
        shown[0] += 1

    fmt = chosen(output, as_json)

    def body() -> None:
        c = _client(ctx)
        path = f"{_swarm_path(ctx)}/events"
        if not follow:
            for e in c.call("GET", path, params={"count": count}).body.get("events", []):
                show(e)
            return
        _follow(c, path, count, limit, show)

    run(body, ctx)


def _follow(
    c: ControlClient, path: str, count: int, limit: int | None, show: Callable[[dict[str, Any]], None]
) -> None:
    """Print the stream's events; a stream that breaks (the controller restarted, a proxy cut it) is
    opened again with the ``Last-Event-ID`` last printed, so no event is printed twice or skipped,
    backing off like every client of the product, until ``RECONNECT_S`` pass without a connection."""
    seen, last, failures, since = 0, None, 0, time.monotonic()
    while True:
        headers: dict[str, str] = {"Last-Event-ID": last} if last else {}
        params = {"count": count, "follow": "true"}
        try:
            with connect_sse(
                c.http, "GET", path, params=params, headers=headers, timeout=httpx.Timeout(30.0, read=None)
            ) as source:
                if source.response.status_code != 200:
                    source.response.read()
                    raise c.fail(source.response)
                failures, since = 0, time.monotonic()
                for sse in source.iter_sse():
                    if sse.event == "end":  # the controller ended it: say why, do not reconnect
                        why = json.loads(sse.data or "{}").get("reason", "ended")
                        raise CliError(f"the event stream was ended by the controller: {why}")
                    if not sse.data:
                        continue
                    show(json.loads(sse.data))
                    last = sse.id or last
                    seen += 1
                    if limit is not None and seen >= limit:
                        return
            return  # closed cleanly: the swarm is no longer served
        except httpx.HTTPError as e:
            failures += 1
            if time.monotonic() - since > RECONNECT_S:
                raise c.unreachable(e) from e
            typer.echo(f"the event stream broke ({type(e).__name__}); reconnecting", err=True)
            time.sleep(_BACKOFF.delay(failures))
