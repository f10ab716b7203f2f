"""``agentihooks admin migrate-keys SWARM -n NAMESPACE``: move a swarm's Redis keys to today's names.

The original swarm v2 names a swarm's keys ``<root>:swarm:<slug>:<part>``;
earlier releases of this product ``<root>:swarm:{<slug>}:<part>``; this one
puts the Swarm's namespace into the Redis Cluster hash tag,
``<root>:swarm:{<namespace>/<slug>}:<part>`` (docs/concepts.md, "The
keyspace"), so same-named Swarms of two namespaces never share a key. The
namespace is always named (``-n``): only the person migrating knows which
namespace's Swarm the name-only keys belonged to. The command talks to Redis
directly (``--redis-url``, as the operator's ``AGENTIHOOKS_REDIS_URL``), never
to the control API, and:

* refuses while any controller holds the swarm's lease — the original's
  ``control-owner``, an earlier release's or this one's — naming the holder,
  so nothing moves under a running controller (each move re-checks them all in
  the same transaction);
* without ``--apply`` prints what it would do and changes nothing;
* moves every key under an old name (values and TTLs unchanged) to the
  namespaced name, the original's first, then the earlier release's; where
  both exist it keeps identical copies once,
  merges hashes whose fields do not disagree, raises ``control-epoch`` to the
  larger of the two (a fencing token never goes back) and reports anything
  else as a conflict, touching neither key;
* moves attempt records an earlier build of this product kept under the
  ``executions`` part (the original's AgentRecords live there) to
  ``attempt-records``;
* drops an expired lease record left without a time-to-live.

On one primary each key moves in one transaction (``RENAMENX`` under
``WATCH``), so a run killed at any point leaves every key under exactly one
name; on a Redis Cluster a move is RESTORE then DEL (see :mod:`.migration`).
Either way running it again finishes the job, and the second run of a finished
migration finds nothing to move. It exits 1 when it refuses (lease held) or when
conflicts remain.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Annotated

import redis
import typer

from ..recovery.errors import InvalidInput
from ..recovery.store.keys import SwarmKeys
from ..redisconn import connect, parse
from .client import EXIT_REFUSED, EXIT_UNREACHABLE, CliError
from .migration import KeyMigration, LeaseHeld, Step
from .output import Format, OutputOption, emit
from .swarm import run

app = typer.Typer(help="Administration of the recovery state in Redis.", no_args_is_help=True)

_ROOT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")


def _connect(url: str, password: str | None, ca_file: str | None = None) -> tuple[redis.Redis, bool]:
    """The operator's connection factory (one server, the primary Sentinel names, or a Redis
    Cluster) and whether it is a cluster (moves without transactions, see :mod:`.migration`)."""
    try:
        mode = parse(url).mode
    except ValueError as e:
        raise CliError(str(e)) from e
    try:
        return connect(url, password or None, ca_file=ca_file or None), mode == "cluster"
    except ValueError as e:
        raise CliError(str(e)) from e


@app.command("migrate-keys")
def migrate_keys(  # noqa: PLR0917 (typer reads each option from a parameter)
    ctx: typer.Context,
    swarm: Annotated[str, typer.Argument(metavar="SWARM", help="The swarm's name (its key slug).")],
    ns: Annotated[
        str | None,
        typer.Option(
            "-n",
            "--namespace",
            help="The namespace of the Swarm these keys belong to (required: never guessed).",
            show_default=False,
        ),
    ] = None,
    apply: Annotated[
        bool, typer.Option("--apply", help="Move the keys; without it, only print the plan.")
    ] = False,
    redis_url: Annotated[
        str, typer.Option("--redis-url", envvar="AGENTIHOOKS_REDIS_URL", help="The Redis holding the swarm.")
    ] = "redis://127.0.0.1:6379/0",
    redis_password: Annotated[
        str | None,
        typer.Option(
            "--redis-password", envvar="AGENTIHOOKS_REDIS_PASSWORD", show_default=False, help="Its password."
        ),
    ] = None,
    redis_ca_file: Annotated[
        str | None,
        typer.Option(
            "--redis-ca-file",
            envvar="AGENTIHOOKS_REDIS_CA_FILE",
            show_default=False,
            help="PEM bundle of the CAs a TLS Redis (rediss://) is verified with.",
        ),
    ] = None,
    prefix: Annotated[
        str, typer.Option("--prefix", envvar="AGENTIHOOKS_SWARM_KEY_PREFIX", help="Root of every key.")
    ] = "agentihooks",
    output: OutputOption = Format.text,
) -> None:
    """Move SWARM's keys from the original's <root>:swarm:<slug>:<part> and an earlier release's
    <root>:swarm:{<slug>}:<part> to <root>:swarm:{<namespace>/<slug>}:<part>."""

    def body() -> None:
        if not _ROOT.fullmatch(prefix):
            raise CliError(f"not a usable key prefix: {prefix!r}")
        namespace = ns or (ctx.find_object(dict) or {}).get("namespace")
        if not namespace:
            raise CliError(
                f"name the namespace of the Swarm {swarm!r} these keys belong to: "
                f"agentihooks admin migrate-keys {swarm} -n <namespace>"
            )
        try:
            keys = SwarmKeys(prefix, swarm, namespace)
        except InvalidInput as e:
            raise CliError(str(e)) from e
        client, cluster = _connect(redis_url, redis_password, redis_ca_file)
        done: list[Step] = []
        try:
            migration = KeyMigration(client, keys, cluster=cluster)
            _migrate(migration, keys.label, apply=apply, done=done, output=output)
        except LeaseHeld as e:
            changed = "Only the steps above were applied." if done else "Nothing was changed."
            raise CliError(
                f"swarm {keys.label}: a controller holds the lease ({e.key}): {e.holder}; stop it (or wait "
                f"until its lease expires) and run again. {changed}"
            ) from e
        except redis.RedisError as e:
            raise CliError(f"redis: {e}", EXIT_UNREACHABLE) from e
        finally:
            client.close()

    run(body)


def _migrate(
    m: KeyMigration, swarm: str, *, apply: bool, done: list[Step], output: Format = Format.text
) -> None:
    """Print the plan (dry run) or apply it step by step; ``done`` receives each applied step. With
    ``-o json|yaml`` one document lists the steps planned or applied, also when a step stopped it."""
    human = output in (Format.text, Format.wide)
    planned = m.plan()
    head = "migrating" if apply else "dry run (nothing is changed; --apply migrates)"
    if human:
        typer.echo(f"swarm {swarm}, root {m.keys.prefix}: {head}")
        if not planned:
            typer.echo("nothing to migrate: no key under an old name")
    try:
        for step in (m.apply() if apply else iter(planned)) if planned else iter(()):
            if human:
                typer.echo("  " + step.line(applied=apply))
            done.append(step)
    finally:
        if not human:
            steps = [dataclasses.asdict(s) for s in done]
            doc = {"swarm": swarm, "root": m.keys.prefix, "applied": apply, "steps": steps}
            emit(doc, output, lambda _: "")
    conflicts = [s for s in done if s.action == "conflict"]
    if conflicts:
        raise CliError(
            f"{len(conflicts)} conflict(s): both names hold different data; resolve by hand, run again",
            EXIT_REFUSED,
        )
    if human and planned:
        typer.echo(f"{len(done)} step(s) {'applied' if apply else 'planned'}")


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="admin")
