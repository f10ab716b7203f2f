"""Process trees of tests: kill everything a process started, at once, the way a Pod's OOM kill does."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (children, their children, ...), read from ``/proc``."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after the last ')'
        fields = stat[stat.rfind(")") + 2 :].split()
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_tree(pid: int) -> list[int]:
    """SIGKILL ``pid``, its process group and every process below it, with their process groups.

    The worker runs its harness in a process group of its own, so killing the
    worker's group alone would leave the harness running; a container's OOM kill
    ends them all. Returns the pids that were signalled.
    """
    pids = [pid, *descendants(pid)]
    groups = set()
    for p in pids:
        try:
            groups.add(os.getpgid(p))
        except ProcessLookupError:
            continue
    for group in groups - {os.getpgrp()}:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
    for p in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGKILL)
    return pids


# -- what a SIGKILLed run leaves behind ------------------------------------------------------------
#
# A run that is interrupted stops what it started in its ``finally``; one that is SIGKILLed cannot.
# So a long run (the fault campaign) marks its process tree: every process it starts inherits
# ``AGENTIHOOKS_RUN_OWNER`` (the owner's pid and start time, so a reused pid is not taken for it).
# The next run first SIGKILLs every process marked by an owner that is no longer alive.

OWNER_VAR = "AGENTIHOOKS_RUN_OWNER"


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2 :].split()[19]  # field 22: start time in clock ticks since boot


def owner_token(pid: int | None = None) -> str:
    """The mark of process ``pid`` (this one by default): ``pid:starttime``."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{_start_time(pid)}"


def _alive(token: str) -> bool:
    pid, _, started = token.partition(":")
    return pid.isdigit() and _start_time(int(pid)) == started


def _owner_of(pid: int) -> str | None:
    """The run mark of ``pid``: from its environment, or from its process title where the process
    rewrote its environment's memory (redis-server does; :func:`title_mark`)."""
    prefix = OWNER_VAR.encode() + b"="
    for name, sep in (("environ", b"\0"), ("cmdline", None)):
        try:
            raw = Path(f"/proc/{pid}/{name}").read_bytes()
        except OSError:
            return None
        for item in raw.replace(b"\0", b" ").split() if sep is None else raw.split(sep):
            if item.startswith(prefix):
                return item[len(prefix) :].decode(errors="replace")
    return None


def title_mark() -> list[str]:
    """redis-server arguments that put this run's mark in its process title, or none outside a run.

    redis-server sets its title over the memory that held its environment, so the inherited mark is
    gone from ``/proc/<pid>/environ``; a SIGKILLed campaign's Redis servers and Sentinels outlived the
    next run's sweep that way (6 Dec 2026). ``proc-title-template`` keeps the mark readable."""
    token = os.environ.get(OWNER_VAR)
    if not token:
        return []
    return ["--proc-title-template", f"{{title}} {{listen-addr}} {{server-mode}} {OWNER_VAR}={token}"]


def sweep_orphans() -> list[int]:
    """SIGKILL every process marked by a run owner that is gone; returns their pids."""
    killed = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        token = _owner_of(int(entry.name))
        if token is not None and not _alive(token):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
    return killed


def kill_own() -> list[int]:
    """SIGKILL every other process that carries this process's own run mark (what an interrupted run's
    unwinding left, or started again meanwhile); returns their pids. Only for a process that started
    everything marked with its token itself (a campaign command), never inside a test session."""
    mine = owner_token()
    killed = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        if _owner_of(int(entry.name)) == mine:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
    return killed


@contextlib.contextmanager
def owned_run() -> Iterator[list[int]]:
    """Sweep what dead runs left, then mark every process started inside as this run's; yields the
    pids swept. Nested uses keep the outer mark."""
    swept = sweep_orphans()
    before = os.environ.get(OWNER_VAR)
    os.environ[OWNER_VAR] = before or owner_token()
    try:
        yield swept
    finally:
        if before is None:
            os.environ.pop(OWNER_VAR, None)
        else:
            os.environ[OWNER_VAR] = before
