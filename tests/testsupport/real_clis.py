"""The real Claude Code and Codex CLIs from npm, installed once into a cache outside the repository.

The pins and the install live in the demo's :mod:`agentihooks_demo.realclis`
(``make evidence`` runs the same CLIs); this module re-exports them under the
names the tests use, and adds what only a test does: :func:`require` skips,
saying so, where npm itself is missing, except under ``CI=true`` where that
fails, and fails on any other install error. ``scripts/install-deps.sh`` runs
``python -m testsupport.real_clis`` (with ``tests`` on ``PYTHONPATH``), which
installs the pinned and the unqualified CLIs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from agentihooks_demo.realclis import (
    CLAUDE_PACKAGE,
    CODEX_PACKAGE,
    EXECUTABLES,
    PACKAGE_OF,
    PINNED,
    UNQUALIFIED,
    InstallFailed,
    NpmMissing,
    cache_dir,
    ensure,
    executable,
    installed_version,
    main,
    prefix_for,
)

__all__ = [
    "CLAUDE_PACKAGE",
    "CODEX_PACKAGE",
    "EXECUTABLES",
    "PACKAGE_OF",
    "PINNED",
    "UNQUALIFIED",
    "InstallFailed",
    "NpmMissing",
    "cache_dir",
    "ensure",
    "executable",
    "installed_version",
    "main",
    "prefix_for",
    "require",
]


def require(packages: Mapping[str, str] = PINNED) -> Path:
    """:func:`ensure` for tests: skip where npm is missing (a failure under ``CI=true``), fail otherwise."""
    import pytest

    try:
        return ensure(packages)
    except NpmMissing as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{e} (CI=true: scripts/install-deps.sh must provide npm)")
        pytest.skip(str(e))
    except InstallFailed as e:
        pytest.fail(str(e))


if __name__ == "__main__":
    raise SystemExit(main())
