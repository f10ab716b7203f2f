"""The shared tail of the ``scripts/gen-*.py`` generators: write the generated file, or check it.

Every generated file in the repository (the chart's CRD and README, the vendored
Pod-template definitions, the values schema's Kubernetes definitions) is kept in
step the same way: the script writes it, and ``--check`` exits 1 naming the
script to run when the committed file differs (the tests run the check).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def arguments(doc: str | None, what: str, default: Path | None) -> argparse.Namespace:
    """``--check`` and, when the script has a default file, ``--target``."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help=f"exit 1 if the committed {what} differs")
    if default is not None:
        parser.add_argument(
            "--target", type=Path, default=default, help=f"the {what} (default: {default.name})"
        )
    return parser.parse_args()


def write_or_check(target: Path, text: str, *, check: bool, script: str) -> int:
    """With ``check``: 0 when ``target`` holds exactly ``text``, else 1 and a line naming ``script``.
    Otherwise write ``text`` to ``target`` and say so."""
    if check:
        current = target.read_text(encoding="utf-8") if target.exists() else ""
        if current != text:
            sys.stderr.write(f"{target} is stale: run scripts/{script}\n")
            return 1
        return 0
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    sys.stdout.write(f"wrote {target}\n")
    return 0
