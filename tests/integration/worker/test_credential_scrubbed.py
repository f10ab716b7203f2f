"""The worker's credential stays in the worker: no git it runs, and not the harness, inherits it.

A ``git`` shim first on the worker's ``PATH`` notes, for every run, whether the worker's token was
in its environment, then runs the real git. A real boot restores a checkpoint (git clones and
applies the source), captures (git bundles, diffs and lists), and runs the fake harness: every git
run was clean, the harness saw no token, and the token is in no log line.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from .conftest import ScenarioFactory, events, harness_runs
from .test_boot_crash_and_signals import start_cli

TOKEN = "tok-worker-secret-0123456789"


def git_shim(folder: Path) -> Path:
    real = shutil.which("git")
    assert real is not None
    folder.mkdir()
    shim = folder / "git"
    shim.write_text(
        "#!/bin/sh\n"
        'if [ -n "$AGENTIHOOKS_WORKER_TOKEN" ]; then echo seen >> "$GIT_SHIM_LOG"; '
        'else echo clean >> "$GIT_SHIM_LOG"; fi\n'
        f'exec {real} "$@"\n'
    )
    shim.chmod(0o755)
    return folder


def test_no_git_run_and_no_harness_inherits_the_token(scenario: ScenarioFactory, tmp_path: Path) -> None:
    sc = scenario("claude", "native")
    shims = git_shim(tmp_path / "shims")
    log = tmp_path / "git-runs.log"
    sc.environ["PATH"] = f"{shims}:{sc.environ['PATH']}"
    sc.environ["GIT_SHIM_LOG"] = str(log)
    sc.environ["AGENTIHOOKS_WORKER_TOKEN"] = TOKEN
    proc = start_cli(sc, FAKE_HARNESS_RUN_SECONDS="0")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert [e["when"] for e in events(err, "checkpoint_committed")][-1] == "final"
    runs = log.read_text().split()
    assert len(runs) >= 5, "the boot ran fewer git commands than a restore and two captures need"
    assert set(runs) == {"clean"}, f"{runs.count('seen')} git runs inherited the worker's token"
    assert not any(r["saw_worker_token"] for r in harness_runs(sc.tmp))
    assert TOKEN not in err
