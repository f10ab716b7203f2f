"""A private redis-server for a benchmark: its own port and folder, AOF on, fsync every second.

The Redis-only benchmarks (``pass.py``, ``admission.py``) each start one per measured size, so
one size's keys and memory never weigh on the next, and stop it (and remove its folder) at the end.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator

import redis


def start_redis(workdir: str) -> tuple[subprocess.Popen[bytes], int]:
    """Start ``redis-server`` with its files in ``workdir``; answers (process, port) once it pings."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    binary = shutil.which("redis-server") or "redis-server"
    proc = subprocess.Popen(
        [
            binary,
            *("--port", str(port), "--bind", "127.0.0.1", "--dir", workdir, "--save", ""),
            *("--appendonly", "yes", "--appendfsync", "everysec", "--loglevel", "warning"),
        ],
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            redis.Redis(port=port).ping()
            return proc, port
        except redis.ConnectionError:
            time.sleep(0.05)
    proc.terminate()
    raise RuntimeError("redis-server did not start within 10 s")


@contextlib.contextmanager
def private_redis(prefix: str) -> Iterator[int]:
    """A redis-server for the ``with`` block; yields its port, then stops it and removes its folder."""
    work = tempfile.mkdtemp(prefix=prefix)
    try:
        proc, port = start_redis(work)
        try:
            yield port
        finally:
            proc.terminate()
            proc.wait()
    finally:
        shutil.rmtree(work, ignore_errors=True)
