"""Entry point of the ``agentihooks`` command; command groups register themselves here.

The control URL and token come from ``--control-url``/``--token`` or from
``AGENTIHOOKS_CONTROL_URL``/``AGENTIHOOKS_TOKEN``; without a URL the CLI
reaches the operator through the kubeconfig (``reach.py``: a port-forward it
opens itself, and the operator token the user may read). ``agentihooks admin ...``
talks to Redis instead (``--redis-url``/``AGENTIHOOKS_REDIS_URL``).
``--version`` prints the installed package's version; ``--install-completion``
and ``--show-completion`` are typer's shell completion.
"""

from __future__ import annotations

import os
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated

import typer

from . import admin, listing, recoveries, swarm

app = typer.Typer(
    name="agentihooks",
    help="Talk to the agentihooks recovery controller.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)


#: The distribution the ``agentihooks`` command ships in.
DISTRIBUTION = "agentihooks-recovery"


def package_version() -> str:
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"agentihooks {package_version()}")
        raise typer.Exit()


@app.callback()
def _root(  # noqa: PLR0917 (typer reads each option from a parameter)
    ctx: typer.Context,
    control_url: Annotated[
        str | None,
        typer.Option("--control-url", envvar="AGENTIHOOKS_CONTROL_URL", help="The controller's API URL."),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token", envvar="AGENTIHOOKS_TOKEN", help="Operator or master token.", show_default=False
        ),
    ] = None,
    ca_file: Annotated[
        str | None,
        typer.Option(
            "--ca-file",
            envvar="AGENTIHOOKS_CA_FILE",
            help="PEM bundle of the CAs the control API's https certificate is verified with.",
            show_default=False,
        ),
    ] = None,
    ns: Annotated[
        str | None,
        typer.Option(
            "-n",
            "--namespace",
            envvar="AGENTIHOOKS_NAMESPACE",
            help="The namespace of the Swarm a command names (default: the kubeconfig context's).",
            show_default=False,
        ),
    ] = None,
    operator_namespace: Annotated[
        str | None,
        typer.Option(
            "--operator-namespace",
            envvar="AGENTIHOOKS_OPERATOR_NAMESPACE",
            help="Without a control URL: the namespace the chart runs the operator in (default: searched).",
            show_default=False,
        ),
    ] = None,
    context: Annotated[
        str | None,
        typer.Option(
            "--context",
            help="Without a control URL: the kubeconfig context to reach the operator through.",
            show_default=False,
        ),
    ] = None,
    kubeconfig: Annotated[
        str | None,
        typer.Option(
            "--kubeconfig",
            help="Without a control URL: the kubeconfig file to use (default: $KUBECONFIG, else "
            "~/.kube/config), as kubectl's --kubeconfig.",
            show_default=False,
        ),
    ] = None,
    request_timeout: Annotated[
        str,
        typer.Option(
            "--request-timeout",
            envvar="AGENTIHOOKS_REQUEST_TIMEOUT",
            help="How long one request to the control API may take: seconds, or a duration such as "
            "10s, 2m (0: no limit), as kubectl's --request-timeout.",
        ),
    ] = "30s",
    _version: Annotated[
        bool,
        typer.Option("--version", callback=_show_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """agentihooks: restore decisions, status and recovery controls for swarms."""
    obj = ctx.ensure_object(dict)
    obj["url"], obj["token"], obj["ca_file"] = control_url, token, ca_file
    obj["timeout"] = _duration(request_timeout)
    if kubeconfig is not None:
        if not os.path.isfile(os.path.expanduser(kubeconfig)):
            raise typer.BadParameter(f"{kubeconfig!r} is not a readable file", param_hint="--kubeconfig")
        os.environ["KUBECONFIG"] = os.path.expanduser(kubeconfig)  # what reach and namespace read
    obj["operator_namespace"], obj["context"] = operator_namespace, context
    if ns is not None:
        obj["namespace"] = ns
        source = ctx.get_parameter_source("ns")
        obj["namespace_from_env"] = source is not None and source.name == "ENVIRONMENT"


recoveries.register(swarm.app)
listing.register(swarm.app)
app.add_typer(swarm.app, name="swarm", cls=listing.SwarmGroup)
admin.register(app)


def _duration(text: str) -> float | None:
    """``--request-timeout``: ``30``, ``30s``, ``2m``, ``1h`` in seconds; ``0`` is no limit (None)."""
    value = text.strip().lower()
    scale = {"s": 1, "m": 60, "h": 3600}.get(value[-1:], 0)
    number = value[:-1] if scale else value
    try:
        seconds = float(number) * (scale or 1)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0 or seconds != seconds or seconds > 86400:  # noqa: PLR0124 (NaN)
        raise typer.BadParameter(
            f"{text!r} is not a duration (seconds, or a number with s, m or h; 0 for no limit)",
            param_hint="--request-timeout",
        )
    return seconds or None


def main() -> None:
    """Console-script entry point."""
    app()
