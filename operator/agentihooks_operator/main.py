"""Entry point of ``agentihooks-operator``: runs the kopf operator with this package's handlers.

Settings come from ``AGENTIHOOKS_*`` variables (:class:`OperatorConfig`);
``--standalone`` turns off kopf's peering (several replicas are safe anyway:
only the holder of a swarm's Redis lease writes).
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any


def run(*, standalone: bool, liveness: str | None = None, **memo_items: Any) -> None:
    """Run the operator until it is signalled; ``memo_items`` pre-fill kopf's memo (config, clock...)."""
    import kopf

    from .api.kopf_hooks import register as register_control_api
    from .k8s import handlers  # noqa: F401  (registers the handlers)
    from .k8s.config import OperatorConfig

    register_control_api()  # the control API, served on kopf's loop (see api/kopf_hooks.py)

    config = memo_items.get("config") or OperatorConfig()
    memo = kopf.Memo(**{**memo_items, "config": config})
    namespaces = config.namespace_list
    kopf.run(
        standalone=standalone,
        clusterwide=not namespaces,
        namespaces=namespaces,
        liveness_endpoint=liveness,
        memo=memo,
    )


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    parser = argparse.ArgumentParser(
        prog="agentihooks-operator", description="Run the swarm recovery operator."
    )
    parser.add_argument("--standalone", action="store_true", help="no kopf peering")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--liveness", default=None, help="e.g. http://0.0.0.0:8081/healthz")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    run(standalone=args.standalone, liveness=args.liveness)


if __name__ == "__main__":
    main()
