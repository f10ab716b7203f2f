"""Entry point of ``agentihooks-operator``: runs the kopf operator with this package's handlers.

Settings come from ``AGENTIHOOKS_*`` variables (:class:`OperatorConfig`);
``--standalone`` turns off kopf's peering (several replicas are safe anyway:
only the holder of a swarm's Redis lease writes).

kopf runs in a thread of its own and this process's main thread takes SIGTERM
and SIGINT: the signal sets one ``stopping`` flag that kopf stops on and that
every recovery loop reads before it takes a lease, so an operator that was told
to stop never takes a swarm over, and hands the ones it holds back at once.

``--remove-finalizers`` does not run the operator: it is the chart's pre-delete hook on ``helm
uninstall`` (:mod:`.uninstall`), which stops the operator and removes its finalizer from the Swarms.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from typing import Any


def run(*, standalone: bool, liveness: str | None = None, **memo_items: Any) -> None:
    """Run the operator until it is signalled; ``memo_items`` pre-fill kopf's memo (config, clock...)."""
    import kopf

    from .api.kopf_hooks import register as register_control_api
    from .k8s import handlers  # noqa: F401  (registers the handlers)
    from .k8s.config import OperatorConfig

    register_control_api()  # the control API, served on kopf's loop (see api/kopf_hooks.py)

    config = memo_items.get("config") or OperatorConfig()
    _refuse_unmigrated(config)
    stopping = threading.Event()
    memo = kopf.Memo(**{**memo_items, "config": config, "stopping": stopping})
    namespaces = config.namespace_list
    failed: list[BaseException] = []

    def serve() -> None:
        try:
            kopf.run(
                standalone=standalone,
                clusterwide=not namespaces,
                namespaces=namespaces,
                liveness_endpoint=liveness,
                memo=memo,
                stop_flag=stopping,
            )
        except BaseException as e:  # re-raised in the main thread below
            failed.append(e)

    def on_signal(signum: int, _frame: Any) -> None:
        logging.getLogger(__name__).info(
            "%s: stopping (no lease is taken from now on)", signal.strsignal(signum)
        )
        stopping.set()

    # kopf warns that it ignores OS signals off the main thread: here that is by design.
    logging.getLogger("kopf._core.reactor.running").addFilter(
        lambda record: "OS signals are ignored" not in record.getMessage()
    )
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    thread = threading.Thread(target=serve, name="kopf")
    thread.start()
    while thread.is_alive():
        thread.join(0.5)
    if failed:
        # kopf stopped on an error (a startup handler refused, for one): exit now, whatever threads
        # (the control API's, Redis clients') are still running, rather than hang half-started.
        logging.getLogger(__name__).error("the operator stopped: %s", failed[0], exc_info=failed[0])
        logging.shutdown()
        os._exit(1)


def _refuse_unmigrated(config: Any) -> None:
    """Exit before anything starts while Redis holds swarms under name-only keys (see
    :mod:`.recovery.store.layout`); a Redis that does not answer yet is left to the startup handler,
    which checks again and waits for it."""
    import redis

    from .k8s.config import connect_redis
    from .recovery.store import layout

    try:
        client = connect_redis(config)
        try:
            names = layout.unmigrated(client, config.swarm_key_prefix)
        finally:
            client.close()
    except (redis.RedisError, OSError, ValueError):
        return
    if names:
        message = layout.refusal(names, config.swarm_key_prefix)
        logging.getLogger(__name__).error("%s", message)
        raise SystemExit(2)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    parser = argparse.ArgumentParser(
        prog="agentihooks-operator", description="Run the swarm recovery operator."
    )
    from .cli.main import package_version

    parser.add_argument("--version", action="version", version=f"agentihooks-operator {package_version()}")
    parser.add_argument("--standalone", action="store_true", help="no kopf peering")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument(
        "--log-format",
        default=os.environ.get("AGENTIHOOKS_LOG_FORMAT", "text"),
        help="text (the default) or json: one JSON object per line, kopf's and ours, each line about a "
        "Swarm naming it under `object` (default: $AGENTIHOOKS_LOG_FORMAT)",
    )
    parser.add_argument("--liveness", default=None, help="e.g. http://0.0.0.0:8081/healthz")
    parser.add_argument(
        "--check-install",
        metavar="CONTROL_URL",
        default=None,
        help="do not run: check that an install works, through the control API's Service at CONTROL_URL "
        "(the chart's helm test)",
    )
    parser.add_argument(
        "--remove-finalizers",
        action="store_true",
        help="do not run: remove the operator's finalizer from every Swarm it watches and exit "
        "(the chart's pre-delete hook on helm uninstall)",
    )
    parser.add_argument(
        "--stop-deployment",
        metavar="NAMESPACE/NAME",
        default=None,
        help="with --remove-finalizers: first scale the operator's Deployment to 0 and wait for its Pods "
        "to go, so no running operator puts the finalizer back",
    )
    parser.add_argument(
        "--wait-seconds",
        type=float,
        default=120.0,
        help="with --stop-deployment: how long to wait for the operator's Pods (default 120)",
    )
    parser.add_argument(
        "--adopt-crd",
        metavar="FILE",
        default=None,
        help="do not run: apply the CRD in FILE and mark it as the release's (the chart's hook when the "
        "Swarm CRD exists but the release does not own it); needs --release",
    )
    parser.add_argument("--release", metavar="NAMESPACE/NAME", default=None, help="with --adopt-crd")
    parser.add_argument("--keep", action="store_true", help="with --adopt-crd: helm.sh/resource-policy: keep")
    args = parser.parse_args(argv)
    from .logs import LogFormat, configure

    if args.log_format not in set(LogFormat):
        parser.error(f"--log-format (or AGENTIHOOKS_LOG_FORMAT) is text or json, not {args.log_format!r}")
    configure(args.log_format, verbose=args.verbose)
    if args.check_install is not None:
        from .selftest import run as check_install

        raise SystemExit(check_install(args.check_install))
    if args.adopt_crd is not None:
        namespace, _, release = (args.release or "").partition("/")
        if not namespace or not release:
            parser.error("--adopt-crd needs --release NAMESPACE/NAME")
        from .crd_adopt import run as adopt_crd

        raise SystemExit(adopt_crd(args.adopt_crd, release=release, namespace=namespace, keep=args.keep))
    if args.remove_finalizers:
        raise SystemExit(remove_finalizers(args.stop_deployment, args.wait_seconds))
    if args.stop_deployment is not None:
        parser.error("--stop-deployment goes with --remove-finalizers")
    run(standalone=args.standalone, liveness=args.liveness, config=settings_or_exit())


def settings_or_exit() -> Any:
    """The operator's and the control API's settings, read once before anything starts; a setting that
    is not valid ends the process with one line per setting naming its variable (exit 2), not a
    traceback from inside kopf's startup."""
    from pydantic import ValidationError

    from .api.config import ApiConfig
    from .k8s.config import OperatorConfig

    config, lines = None, []
    for model in (OperatorConfig, ApiConfig):
        try:
            read = model()
        except ValidationError as e:
            lines += settings_errors(e)
            continue
        config = read if model is OperatorConfig else config
    if lines:
        log = logging.getLogger(__name__)
        for line in lines:
            log.error("%s", line)
        log.error("the operator did not start: fix the settings above")
        logging.shutdown()
        raise SystemExit(2)
    return config


def settings_errors(error: Any) -> list[str]:
    """``AGENTIHOOKS_<NAME>: <what is wrong>`` for each error of a settings ``ValidationError`` (the
    value itself is never shown: it may be a credential)."""
    out = []
    for item in error.errors(include_input=False, include_url=False):
        name = "AGENTIHOOKS_" + "_".join(str(part) for part in item["loc"]).upper()
        message = str(item["msg"]).removeprefix("Value error, ")
        if message.startswith(name):  # the validator named the variable already
            message = message[len(name) :].lstrip(": ")
        out.append(f"{name}: {message}")
    return out


def remove_finalizers(stop: str | None, wait_seconds: float) -> int:
    """``--remove-finalizers``: the uninstall hook's job (:mod:`.uninstall`); the exit status."""
    from .k8s.client import KubeClient
    from .k8s.config import OperatorConfig
    from .k8s.errors import ApiError, NoCredentials
    from .uninstall import UninstallError
    from .uninstall import run as uninstall

    logger = logging.getLogger("agentihooks_operator.uninstall")
    try:
        kube = KubeClient.from_environment(agent="agentihooks-operator/uninstall")
        try:
            uninstall(kube, OperatorConfig().namespace_list, stop=stop, wait_seconds=wait_seconds)
        finally:
            kube.close()
    except (ApiError, NoCredentials, UninstallError) as e:
        logger.error("the Swarms' finalizers were not removed: %s", e)
        return 1
    return 0


if __name__ == "__main__":
    main()
