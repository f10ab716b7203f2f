"""Every process the demo starts, each in its own process group, and how they all stop.

A child started here gets a new session (so Ctrl-C in the terminal reaches
only the demo, which then stops the children itself) and is remembered until
it is stopped: SIGTERM to its whole group, then SIGKILL after a grace period,
so no worker's harness or git child is left behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(
    host: str, port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = 30
) -> None:
    """Return once ``proc`` accepts connections on ``host:port``; RuntimeError naming ``what`` if it
    exits or does not within ``timeout`` s (a server a client reaches too early refuses it)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((host, port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"{what} did not start listening on {host}:{port}") from None
            time.sleep(0.1)


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def pgid(self) -> int:
        return self.proc.pid


@dataclass
class Processes:
    """The demo's children, stopped in reverse start order."""

    children: list[Child] = field(default_factory=list)

    def start(
        self, name: str, argv: list[str], *, env: dict[str, str], log: Path, cwd: Path | None = None
    ) -> Child:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            proc = subprocess.Popen(
                argv,
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        child = Child(name, proc, log)
        self.children.append(child)
        return child

    def adopt(self, name: str, proc: subprocess.Popen[bytes], log: Path) -> Child:
        child = Child(name, proc, log)
        self.children.append(child)
        return child

    def stop(self, child: Child, *, grace: float = 5.0) -> int | None:
        signal_group(child.pgid, signal.SIGTERM)
        try:
            code = child.proc.wait(grace)
        except subprocess.TimeoutExpired:
            signal_group(child.pgid, signal.SIGKILL)
            code = child.proc.wait(5)
        signal_group(child.pgid, signal.SIGKILL)  # anything its children left in the group
        with contextlib.suppress(ValueError):
            self.children.remove(child)
        return code

    def stop_all(self) -> None:
        for child in reversed(list(self.children)):
            self.stop(child)


def signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def wait_for(check: object, *, timeout: float, what: str, interval: float = 0.1) -> object:
    """Call ``check()`` until it returns something truthy (blocking helper for start-up)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()  # type: ignore[operator]
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(interval)
