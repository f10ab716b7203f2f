"""The operator as a separate process, optionally SIGKILLing itself at a named recovery write point.

Run by the crash tests: ``KILL_AT=after:launch KILL_AT_NTH=2 python operator_process.py``.
Everything else comes from the ordinary ``AGENTIHOOKS_*`` variables and ``KUBECONFIG``.
"""

from __future__ import annotations

import logging
import os
import signal
import sys

from agentihooks_operator.main import run

POINT = os.environ.get("KILL_AT", "")
NTH = int(os.environ.get("KILL_AT_NTH", "1"))
_seen = [0]


def faults(point: str) -> None:
    if point != POINT:
        return
    _seen[0] += 1
    if _seen[0] == NTH:
        sys.stderr.write(f"operator_process: SIGKILL at {point} (#{NTH})\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    run(standalone=True, faults=faults if POINT else None)
