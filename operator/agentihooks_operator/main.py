"""Entry point of ``agentihooks-operator``: runs the kopf operator (filled in by the operator issue)."""

from __future__ import annotations

import sys


def main() -> None:
    """Console-script entry point."""
    sys.stderr.write("agentihooks-operator: the kopf operator is not wired yet\n")
    raise SystemExit(2)
