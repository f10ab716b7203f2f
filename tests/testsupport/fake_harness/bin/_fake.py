"""Shared body of the fake harness executables (see ``testsupport.fake_harness``)."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

STOP = {"signal": 0}


def _on_signal(signum, frame):
    STOP["signal"] = signum


def log_run(entry):
    path = os.environ.get("FAKE_HARNESS_LOG")
    entry["saw_worker_token"] = "AGENTIHOOKS_WORKER_TOKEN" in os.environ
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")


def read_stdin():
    """Piped input, as both real CLIs take it (context beside the prompt argument)."""
    if sys.stdin is None or sys.stdin.isatty():
        return ""
    return sys.stdin.read()


def read_prompt(positional):
    piped = read_stdin()
    prompt = positional[-1] if positional else ""
    return piped + ("\n\n" if piped and prompt else "") + prompt, len(piped.encode())


def run_turns(write_record):
    """Write records, stay alive as told, return the exit code."""
    handler = signal.SIG_IGN if os.environ.get("FAKE_HARNESS_IGNORE_TERM") else _on_signal
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    text = os.environ.get("FAKE_HARNESS_TEXT", "done")
    for _ in range(int(os.environ.get("FAKE_HARNESS_RECORDS", "1"))):
        write_record({"role": "assistant", "text": text})
    run = os.environ.get("FAKE_HARNESS_RUN_SECONDS", "0")
    deadline = float("inf") if run == "forever" else time.monotonic() + float(run)
    ready = os.environ.get("FAKE_HARNESS_READY")
    if ready:
        Path(ready).write_text(str(os.getpid()))
    tick = float(os.environ.get("FAKE_HARNESS_TICK", "0"))
    ticks = int(os.environ.get("FAKE_HARNESS_TICKS", "0"))  # 0: no limit
    next_tick = time.monotonic() + tick
    written = 0
    while not STOP["signal"] and time.monotonic() < deadline:
        time.sleep(0.05)
        if tick and time.monotonic() >= next_tick and (not ticks or written < ticks):
            write_record({"role": "assistant", "text": "tick"})
            written += 1
            next_tick = time.monotonic() + tick
    if STOP["signal"]:
        write_record({"role": "system", "text": "stopped"})
        default = 128 + STOP["signal"]
        return int(os.environ.get("FAKE_HARNESS_TERM_EXIT", str(default)))
    return int(os.environ.get("FAKE_HARNESS_EXIT", "0"))


def append(path, record):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as f:
        f.write(json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n")


def run_hooks(home, event):
    """The ``command`` hooks of ``event`` in the user settings, run as Claude Code runs them."""
    try:
        data = json.loads((home / "settings.json").read_text())
    except (OSError, ValueError):
        return
    for group in (data.get("hooks") or {}).get(event) or []:
        for hook in group.get("hooks") or []:
            if hook.get("type") == "command":
                subprocess.run(["sh", "-c", hook["command"]], check=False)
                with open(home / "hooks-run.log", "a", encoding="utf-8") as f:
                    f.write(event + "\n")


def claude_main(argv):
    if "--version" in argv or "-v" in argv:
        print(os.environ.get("FAKE_CLAUDE_VERSION", "2.1.332 (Claude Code)"))
        return 0
    if "--help" in argv or "-h" in argv:
        print(
            "Usage: claude [options] [command] [prompt]\n"
            "  -r, --resume [value]  Resume a conversation by session ID"
        )
        return 0
    if "-c" in argv or "--continue" in argv:
        print("fake claude: --continue is not allowed in tests", file=sys.stderr)
        return 2
    home = Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")
    cwd = os.getcwd()
    project = home / "projects" / re.sub(r"[^A-Za-z0-9]", "-", cwd)
    args = list(argv)
    session = None
    if "--resume" in args or "-r" in args:
        i = args.index("--resume") if "--resume" in args else args.index("-r")
        session = args[i + 1]
        del args[i : i + 2]
        if not (project / f"{session}.jsonl").is_file():
            print(f"No conversation found with session ID: {session}", file=sys.stderr)
            return 1
    positional = [a for a in args if not a.startswith("-")]
    prompt, piped = ("", 0) if session else read_prompt(positional)
    session = session or str(uuid.uuid4())
    path = project / f"{session}.jsonl"
    log_run(
        {
            "harness": "claude",
            "argv": argv,
            "cwd": cwd,
            "session": session,
            "stdin_bytes": piped,
        }
    )

    def write(rec):
        append(path, {"type": rec["role"], "sessionId": session, "cwd": cwd, "message": rec["text"]})
        if rec["text"] == "tick":  # a turn ended: Claude Code runs its Stop hooks
            run_hooks(home, "Stop")

    if prompt:
        write({"role": "user", "text": prompt})
    return run_turns(write)


def codex_main(argv):
    if "--version" in argv or "-V" in argv:
        print(os.environ.get("FAKE_CODEX_VERSION", "codex-cli 0.162.1"))
        return 0
    if "--help" in argv or "-h" in argv:
        print("Usage: codex [OPTIONS] [PROMPT]\n  resume  Resume a previous interactive session")
        return 0
    if "--last" in argv:
        print("fake codex: --last is not allowed in tests", file=sys.stderr)
        return 2
    home = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")
    args = [a for a in argv if not a.startswith("-")]
    if args and args[0] == "exec":
        args = args[1:]
    session = None
    path = None
    if args and args[0] == "resume":
        if len(args) < 2:
            print("fake codex: resume needs a session id", file=sys.stderr)
            return 2
        session = args[1]
        found = sorted((home / "sessions").glob(f"*/*/*/rollout-*-{session}.jsonl"))
        if not found:
            print(f"fake codex: no rollout for {session}", file=sys.stderr)
            return 1
        path = found[0]
        prompt, piped = "", 0
    else:
        prompt, piped = read_prompt(args)
        session = str(uuid.uuid4())
        now = dt.datetime.now()
        path = (
            home
            / "sessions"
            / now.strftime("%Y/%m/%d")
            / f"rollout-{now.strftime('%Y-%m-%dT%H-%M-%S')}-{session}.jsonl"
        )
        version = os.environ.get("FAKE_CODEX_VERSION", "codex-cli 0.162.1").split()[-1]
        append(
            path,
            {
                "timestamp": now.isoformat(),
                "type": "session_meta",
                "payload": {"id": session, "cwd": os.getcwd(), "cli_version": version},
            },
        )
        (home / "state_5.sqlite").write_bytes(b"SQLite format 3\x00" + os.getcwd().encode())
    log_run(
        {
            "harness": "codex",
            "argv": argv,
            "cwd": os.getcwd(),
            "session": session,
            "stdin_bytes": piped,
        }
    )

    def write(rec):
        append(path, {"type": "response_item", "payload": {"role": rec["role"], "text": rec["text"]}})

    if prompt:
        write({"role": "user", "text": prompt})
    return run_turns(write)
