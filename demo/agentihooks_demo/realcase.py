"""``make evidence``'s real-harness cases: Claude Code and Codex themselves resume a conversation they wrote.

One case per CLI, at the pinned version (:data:`agentihooks_demo.realclis.PINNED`),
run with the steps of :mod:`agentihooks_demo.realresume` that
``tests/integration/worker/test_real_cli_resume.py`` runs too: the first
attempt's real CLI holds a short conversation against the loopback model API
(:mod:`agentihooks_demo.model_api`) and writes its own session; its worker
captures it; every process of the attempt is SIGKILLed; the replacement boots
with the native directive the controller writes, restores the checkpoint, and
the worker starts the real CLI with the resume command.

What the case records is what was observed: the version the replacement's
worker read from the CLI (``run/restore.json``), the CLI's own ``--version``
line, the version the first attempt's worker recorded in the checkpoint, the
command the worker started, and whether the resumed request carried the
earlier turns byte for byte (:func:`agentihooks_demo.realresume.carried_turns`).

These cases run at worker level: two ``agentihooks-worker boot`` processes
with launch records and a local checkpoint store, without the operator or the
Kubernetes API. Where node, npm or the pinned CLIs are missing the case is
recorded ``skipped`` with the reason.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentihooks_checkpoint.scope import StoreScope
from agentihooks_worker.harness import harness_for

from . import realclis
from .cases import Case
from .model_api import ModelApi
from .realresume import (
    DUMMY_ANTHROPIC_KEY,
    DUMMY_OPENAI_KEY,
    HARNESSES,
    ResumeFailed,
    Seat,
    carried_turns,
    first_attempt_and_kill,
    resume_natively,
)
from .stack import demo_repository

NAMES = {"claude": "Claude Code", "codex": "Codex"}
#: Each phase (the first attempt's conversation and capture; the replacement's run) must end within this.
PHASE_SECONDS = 40.0


def unavailable() -> str | None:
    """Why the real CLIs cannot run here, or ``None``. Never installs anything (``make install`` does)."""
    if shutil.which("node") is None:
        return "node is not installed on this machine, so the real harness CLIs cannot run"
    if realclis.installed(realclis.PINNED) is not None:
        return None
    pins = ", ".join(f"{p}@{v}" for p, v in realclis.PINNED.items())
    if shutil.which("npm") is None:
        return f"npm is not installed on this machine, so {pins} could not be installed"
    return (
        f"{pins} are not installed in {realclis.cache_dir()} (make install / scripts/install-deps.sh does it)"
    )


def _version_line(cli: Path, env: dict[str, str]) -> str:
    try:
        done = subprocess.run(
            [str(cli), "--version"], capture_output=True, text=True, timeout=30, env=env, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unavailable: {e}"
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0] if lines else ""


def _redact(text: str) -> str:
    for secret in (DUMMY_ANTHROPIC_KEY, DUMMY_OPENAI_KEY):
        text = text.replace(secret, "<redacted>")
    return text


def real_harness_case(harness: str, workdir: Path, say: Callable[[str], None] = print) -> Case:
    """Run the real-harness case of ``harness`` (``claude`` or ``codex``) in ``workdir``."""
    package = realclis.PACKAGE_OF[harness]
    pinned = realclis.PINNED[package]
    case = Case(
        f"real-harness-{harness}",
        f"{NAMES[harness]} itself ({package}@{pinned}) resumes, after an OOM kill, the conversation it wrote",
        {"harness": harness, "version": pinned, "continuity": "native", "turns_carried": True},
    )
    case.ran_on = "worker processes on this machine (no Pod, no operator)"
    case.observed["harness"] = harness
    reason = unavailable()
    bins = realclis.installed(realclis.PINNED)
    if reason is not None or bins is None:
        case.skipped = reason or "the pinned CLIs are not installed"
        return case
    case.observed["npm_package"] = f"{package}@{realclis.installed_version(bins.parent.parent, package)}"
    folder = workdir / "real-harness" / harness
    folder.mkdir(parents=True, exist_ok=True)
    repo = demo_repository(folder / "project")
    scope = StoreScope(swarm="evidence-real", task_id=f"t-real-{harness}", task_generation=1)
    with ModelApi() as api:
        seat = Seat(folder, harness, bins, api, repo, scope=scope)
        try:
            say(f"case {case.id}: the first attempt's {NAMES[harness]} converses; its worker captures")
            fenced = first_attempt_and_kill(seat, timeout=PHASE_SECONDS)
            say(f"case {case.id}: attempt killed; the replacement restores checkpoint {fenced.checkpoint_id}")
            resumed = resume_natively(seat, fenced, timeout=PHASE_SECONDS)
            cli_env = seat.environment(folder / "launch-exe-2.json")
        except ResumeFailed as e:
            case.observed["error"] = _redact(str(e))[-3000:]
            return case
        finally:
            seat.kill_all()
    adapter = harness_for(harness)
    checks = carried_turns(harness, fenced, resumed.request)
    expected_argv = adapter.resume_command(seat.agent(), fenced.session_id)
    observed: dict[str, Any] = {
        "version": resumed.harness_version,
        "version_output": _version_line(seat.cli, cli_env),
        "session_written_by": fenced.written_by,
        "continuity": resumed.recovery[0] if len(resumed.recovery) == 1 else resumed.recovery,
        "exit_code": resumed.exit_code,
        "session_id": fenced.session_id,
        "resume_command": [Path(resumed.argv[0]).name, *resumed.argv[1:]] if resumed.argv else [],
        "resume_command_is_the_adapters": resumed.argv == expected_argv,
        "executable": str(seat.cli),
        "turns_carried": all(checks.values()),
        "turn_checks": checks,
    }
    case.observed.update(observed)
    case.observed = _redacted(case.observed)
    case.add_input("checkpoint record (manifest)", fenced.manifest, checkpoint_id=fenced.checkpoint_id)
    case.add_input(
        "session transcript the CLI wrote, at the kill", fenced.transcript, path=fenced.transcript_name
    )
    case.add_input(
        "first attempt's first request body, as the model API received it", fenced.first_request.body
    )
    if resumed.request is not None:
        case.add_input("resumed CLI's first request body, as the model API received it", resumed.request.body)
    return case


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return _redact(value)
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    return value


def real_harness_cases(workdir: Path, say: Callable[[str], None] = print) -> list[Case]:
    return [real_harness_case(h, workdir, say) for h in HARNESSES]


def harness_section(cases: list[Case]) -> list[dict[str, Any]]:
    """The record's ``harnesses``: per real CLI, what ran and what it showed (or why it did not run)."""
    out = []
    for case in cases:
        o = case.observed
        row: dict[str, Any] = {"harness": o.get("harness"), "case": case.id, "result": case.result}
        if case.skipped is not None:
            row["skip_reason"] = case.skipped
        else:
            for key in (
                "npm_package",
                "version",
                "version_output",
                "session_written_by",
                "resume_command",
                "turns_carried",
            ):
                row[key] = o.get(key)
        out.append(row)
    return out
