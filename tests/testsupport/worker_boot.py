"""A replacement's worker as the controller launches it: its launch record and a real boot process.

The worker tests that talk to a real control API (controller restart,
relaunch after a refusal, remote restore) all need the launch record the
operator would write for a :class:`LaunchPlan` with ``checkpoint_remote``, and
most of them run ``agentihooks-worker boot`` as a real process with the fake
harness on its PATH. One copy of both lives here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from agentihooks_operator.recovery import LaunchPlan

from .fake_harness import BIN, CLAUDE


def remote_launch(
    plan: LaunchPlan, control_url: str, project: str, swarm: str = "swarm-a", *, remote: bool = True
) -> dict[str, Any]:
    """The launch record of ``plan``: a Claude seat restoring through the control API (``remote``),
    or through its own store (then given by the worker's environment) reporting to that API."""
    return {
        "schema_version": 1,
        "authority": {
            "execution_id": plan.execution_id,
            "generation": plan.generation,
            "task_id": plan.task_id,
            "seat_id": plan.seat,
            "swarm_id": swarm,
            "grant_id": plan.grant_id,
        },
        "harness": "claude",
        "agent": [str(CLAUDE), "-p", "carry on"],
        "control_url": control_url,
        "registration": {
            "projects": [project],
            "task_generation": plan.task_generation,
            "compatibility_key": plan.compatibility_key,
        },
        "restore": plan.directive.model_dump(mode="json") if plan.directive else None,
        "restore_from": plan.restore_from.model_dump(mode="json") if plan.restore_from else None,
        "checkpoint_remote": remote,
        **({"store_namespace": plan.store_namespace} if plan.store_namespace else {}),
    }


def start_boot(
    plan: LaunchPlan,
    folder: Path,
    *,
    control_url: str,
    project: str,
    worktree: Path | str,
    remote: bool = True,
    **env: str,
) -> subprocess.Popen[str]:
    """``agentihooks-worker boot`` for ``plan`` in ``folder`` (created), as its Pod would run it.

    The process gets the attempt's credential, its launch record and the project's remote; ``env``
    adds or overrides variables (e.g. the fake harness's version). Nothing else of this process's
    ``FAKE_*``/``AGENTIHOOKS_*`` environment leaks in.
    """
    record = json.dumps(remote_launch(plan, control_url, project, remote=remote))
    return start_worker(
        record, plan.worker_token.get_secret_value(), folder, project=project, worktree=worktree, **env
    )


def start_worker(
    launch_json: str, token: str, folder: Path, *, project: str, worktree: Path | str, **env: str
) -> subprocess.Popen[str]:
    """``agentihooks-worker boot`` of a launch record as given (e.g. read from the attempt's Secret),
    with the worker credential ``token``, in ``folder`` (created): what the worker Pod's
    container runs. The fake harness is first on ``PATH``; its stderr is piped."""
    folder.mkdir()
    (folder / "launch.json").write_text(launch_json)
    full = {k: v for k, v in os.environ.items() if not k.startswith(("FAKE_", "AGENTIHOOKS_"))}
    full.update(
        {
            "PATH": f"{BIN}{os.pathsep}{full.get('PATH', '')}",
            "FAKE_HARNESS_LOG": str(folder / "harness.log"),
            "AGENTIHOOKS_WORKER_TOKEN": token,
            "AGENTIHOOKS_ATTEMPTS_DIR": str(folder / "attempts"),
            "AGENTIHOOKS_LAUNCH_RECORD": str(folder / "launch.json"),
            "AGENTIHOOKS_PROJECT_REMOTES": json.dumps({project: str(worktree)}),
            "AGENTIHOOKS_CAPTURE_INTERVAL_SECONDS": "0",
            "AGENTIHOOKS_CAPTURE_MODE": "periodic",  # nothing captured while the harness runs, unless asked
            **env,
        }
    )
    cmd = [sys.executable, "-c", "from agentihooks_worker.cli import main; main()", "boot"]
    return subprocess.Popen(cmd, env=full, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
