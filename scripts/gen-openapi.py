#!/usr/bin/env python3
"""Write docs/openapi.json, the control API's OpenAPI document, from the route table.

The operator serves the same document at ``GET /v1/openapi.json``; this file lets a reader, a client
generator or a review see it without running an operator. It is generated from
``agentihooks_operator.api.openapi.document()`` and never edited by hand: run ``scripts/gen-openapi.py``
after changing a route; ``--check`` exits 1 when the file has drifted (tests/unit/api run it, and
tests/integration/api compare it with what a live operator serves).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # generated_file sits beside this script
from generated_file import arguments, write_or_check

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "docs" / "openapi.json"


def render() -> str:
    """The file's exact text."""
    sys.path.insert(0, str(ROOT / "operator"))
    from agentihooks_operator.api.openapi import document

    return json.dumps(document(), indent=2, sort_keys=False) + "\n"


def main() -> int:
    args = arguments(__doc__, "OpenAPI document", TARGET)
    return write_or_check(args.target, render(), check=args.check, script="gen-openapi.py")


if __name__ == "__main__":
    raise SystemExit(main())
