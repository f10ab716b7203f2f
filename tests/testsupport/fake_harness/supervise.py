"""Run :class:`agentihooks_worker.supervisor.Supervisor` in its own process, for signal tests.

``python -m testsupport.fake_harness.supervise <journal> <home> <cwd> <interval> [fail] -- argv...``
records every capture (``when session watermark``) and every progress report
in ``journal``; the capture hook reads the session from the harness home like
the real one does. ``fail`` makes every capture raise.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from agentihooks_worker.harness import ClaudeCode
from agentihooks_worker.supervisor import CaptureResult, CaptureWhen, Supervisor
from agentihooks_worker.transcripts import count_records


def main() -> int:
    sep = sys.argv.index("--")
    journal, home, cwd, interval, *flags = sys.argv[1:sep]
    argv = sys.argv[sep + 1 :]
    fail = "fail" in flags

    def note(line: str) -> None:
        with open(journal, "a", encoding="utf-8") as f:
            f.write(line + "\n")

    def capture(when: CaptureWhen) -> CaptureResult:
        if fail:
            note(f"capture-failed {when}")
            raise RuntimeError("store down")
        session = ClaudeCode().newest_session(Path(home), Path(cwd))
        sid = session.session_id if session else None
        mark = count_records(Path(home) / session.transcript) if session else None
        note(f"capture {when} {sid} {mark}")
        return CaptureResult(checkpoint_id=f"c-{when}", session_id=sid, watermark=mark)

    sup = Supervisor(
        argv,
        env=dict(os.environ, CLAUDE_CONFIG_DIR=home),
        cwd=Path(cwd),
        capture=capture,
        interval=float(interval),
        on_progress=lambda s, w, final: note(f"progress {s} {w}" + (" final" if final else "")),
        kill_seconds=float(os.environ.get("SUPERVISE_KILL_SECONDS", "10")),
    )
    return sup.run()


if __name__ == "__main__":
    sys.exit(main())
