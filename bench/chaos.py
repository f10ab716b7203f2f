"""The long fault campaign as a benchmark command (issue 26): 30 minutes by default.

Starts a control plane of its own, runs the campaign of tests/testsupport/chaos
(operator replicas with the chart's RBAC, Redis under Sentinel, seats failing at
random, a master deciding, the nemesis hurting replicas, Redis, the API server and
the broker), then prints what was injected, the recovery times and the checker's
verdict. Exits 1 on any violated invariant; the seed is printed first, so a failing
run replays with the same ``--seed``. The test tier runs a 3-minute one
(tests/integration/chaos). Figures: docs/reliability.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from testsupport.chaos.campaign import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:], default_minutes=30.0))
