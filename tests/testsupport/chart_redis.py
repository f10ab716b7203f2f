"""Run the chart's embedded-Redis container command with this machine's redis-server.

The command comes from the rendered StatefulSet; only its port and data folder are moved to a free
loopback port and a temp folder, so tests exercise exactly what the chart would run in the cluster.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import redis

from testsupport.helm import Helm, one
from testsupport.redis_server import redis_binary


def path_with_redis(bindir: Path) -> dict[str, str]:
    """An environment whose PATH finds `redis-server` (the image runs it from PATH)."""
    bindir.mkdir(parents=True, exist_ok=True)
    link = bindir / "redis-server"
    if not link.exists():
        link.symlink_to(redis_binary())
    return {"PATH": f"{bindir}:{os.environ.get('PATH', '')}"}


def rendered_command(helm: Helm, values: dict[str, Any], port: int, data: Path) -> list[str]:
    sts = one(helm.render(values), "StatefulSet")
    container = sts["spec"]["template"]["spec"]["containers"][0]
    script = container["args"][0]
    assert container["command"] == ["sh", "-c"]
    assert "--port 6379" in script and "--dir /data" in script
    return [
        "sh",
        "-c",
        script.replace("--port 6379", f"--port {port}").replace("--dir /data", f"--dir {data}"),
    ]


class ChartRedis:
    """The rendered Redis command as a process: start, SIGKILL, start again."""

    def __init__(self, argv: list[str], env: dict[str, str], port: int, password: str | None) -> None:
        self.argv, self.env, self.port, self.password = argv, env, port, password
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.argv, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        client = redis.Redis(port=self.port, password=self.password, socket_timeout=2)
        for _ in range(400):
            try:
                client.ping()
                return
            except (redis.ConnectionError, redis.TimeoutError):
                assert self.proc.poll() is None, "redis-server exited at start"
                time.sleep(0.05)
        raise AssertionError("redis-server did not answer")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
