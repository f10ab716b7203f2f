"""Fake ``claude`` and ``codex`` executables with the real CLIs' surface, for tests.

Put :data:`BIN` first on ``PATH`` (or call the scripts by path). Behaviour is
chosen through the environment:

* ``FAKE_CLAUDE_VERSION`` / ``FAKE_CODEX_VERSION``: the ``--version`` line.
* ``FAKE_HARNESS_EXIT``: exit code when the run ends by itself (default 0).
* ``FAKE_HARNESS_RUN_SECONDS``: keep running this long (``forever`` until a signal).
* ``FAKE_HARNESS_TERM_EXIT``: exit code after SIGTERM/SIGINT (default 143 / 130).
* ``FAKE_HARNESS_IGNORE_TERM``: ignore SIGTERM/SIGINT (to test the kill budget).
* ``FAKE_HARNESS_TICK``: while running, write one more record every this many seconds.
* ``FAKE_HARNESS_RECORDS``: assistant records written per turn (default 1).
* ``FAKE_HARNESS_TEXT``: text of those records (may hold U+2028/U+2029).
* ``FAKE_HARNESS_LOG``: a file the fake appends one JSON line per run to (argv, cwd, stdin size, session).
"""

from __future__ import annotations

from pathlib import Path

BIN = Path(__file__).parent / "bin"
CLAUDE = BIN / "claude"
CODEX = BIN / "codex"
