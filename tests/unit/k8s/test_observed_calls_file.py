"""The recorded API-call list the chart's RBAC is compared with is well formed."""

from __future__ import annotations

import json
from pathlib import Path

FILE = Path(__file__).resolve().parents[2] / "integration" / "operator" / "observed-api-calls.json"
VERBS = {"get", "list", "watch", "create", "update", "patch", "delete"}


def test_file_lists_unique_rbac_calls() -> None:
    rows = json.loads(FILE.read_text())["calls"]
    keys = [(r["group"], r["resource"], r["verb"]) for r in rows]
    assert len(keys) == len(set(keys))
    assert all(r["verb"] in VERBS for r in rows)
    assert ("", "pods", "create") in keys and ("agentihooks.io", "swarms/status", "patch") in keys
    # Secrets are read only by name (a master's or the account broker's credential): never
    # enumerated, so the chart never needs list/watch on them.
    assert not [k for k in keys if k[1] == "secrets" and k[2] in {"list", "watch"}], (
        "never lists or watches Secrets"
    )
