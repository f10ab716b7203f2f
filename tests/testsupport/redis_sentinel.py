"""A real Redis primary, two replicas and three Sentinels on loopback, for failover tests.

Same ``redis-server`` binary throughout (``--sentinel`` makes it a Sentinel;
Debian's ``redis-sentinel`` package is only a link to it). Sentinels declare a
primary down after ``down_after_ms`` without an answer and elect one of
themselves (quorum 2 of 3) to promote the replica, typically 2-4 s after the
primary is killed. Two replicas, because a write waits for one replica
(``WAIT 1``): after a failover the promoted one still has a replica to wait for.
``url`` is the ``redis+sentinel://`` address the product's connection factory
takes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import redis

from .processes import title_mark
from .redis_server import RedisServer, free_port, redis_binary

MASTER = "agentihooks"


class RedisSentinelProcesses:
    def __init__(
        self, workdir: Path, *, replicas: int = 2, sentinels: int = 3, down_after_ms: int = 1000
    ) -> None:
        self.workdir = workdir
        self.down_after_ms = down_after_ms
        self.primary = RedisServer(workdir / "primary", appendonly=False)
        self.replicas = [
            RedisServer(
                workdir / f"replica-{i}",
                appendonly=False,
                extra_args=["--replicaof", "127.0.0.1", str(self.primary.port)],
            )
            for i in range(replicas)
        ]
        self.sentinel_ports = [free_port() for _ in range(sentinels)]
        self.sentinels: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{MASTER}"

    def start(self) -> None:
        self.primary.start()
        for replica in self.replicas:
            replica.start()
        self.wait_replicated()
        quorum = len(self.sentinel_ports) // 2 + 1
        for i, port in enumerate(self.sentinel_ports):
            folder = self.workdir / f"sentinel-{i}"
            folder.mkdir(parents=True, exist_ok=True)
            conf = folder / "sentinel.conf"  # Sentinel rewrites its config file: one each
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {folder}\nprotected-mode no\n"
                f"sentinel monitor {MASTER} 127.0.0.1 {self.primary.port} {quorum}\n"
                f"sentinel down-after-milliseconds {MASTER} {self.down_after_ms}\n"
                f"sentinel failover-timeout {MASTER} 10000\n"
                f"sentinel parallel-syncs {MASTER} 1\n"
            )
            self.sentinels.append(
                subprocess.Popen(
                    [
                        redis_binary(),
                        str(conf),
                        "--sentinel",
                        "--loglevel",
                        "notice",
                        "--logfile",
                        str(folder / "sentinel.log"),
                        *title_mark(),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        self._until(lambda: all(self._knows_replica(p) for p in self.sentinel_ports), "Sentinels ready")

    def wait_replicated(self) -> None:
        """Until every live replica's link to its primary is up."""

        def linked() -> bool:
            for replica in self.replicas:
                if replica.proc is None or replica.port == self.primary_port():
                    continue
                with redis.Redis(port=replica.port, socket_timeout=2) as c:
                    if c.info("replication").get("master_link_status") != "up":
                        return False
            return True

        self._until(linked, "replicas linked")

    def _knows_replica(self, port: int) -> bool:
        with redis.Redis(port=port, socket_timeout=2) as c:
            try:
                state = c.execute_command("SENTINEL", "MASTER", MASTER)
            except redis.RedisError:
                return False
        fields = dict(zip(state[::2], state[1::2], strict=False)) if isinstance(state, list) else state
        return (
            int(fields.get(b"num-slaves", fields.get("num-slaves", 0))) >= 1
            and int(fields.get(b"num-other-sentinels", fields.get("num-other-sentinels", 0)))
            >= len(self.sentinel_ports) - 1
        )

    def primary_port(self) -> int:
        """The primary's port as the Sentinels report it now (the first one's until they run)."""
        if not self.sentinels:
            return self.primary.port
        with redis.Redis(port=self.sentinel_ports[0], socket_timeout=2) as c:
            _, port = c.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER)
            return int(port)

    def primaries(self) -> list[int | None]:
        """The primary's port as each Sentinel names it now (``None``: that Sentinel did not answer).

        After a failover the Sentinels learn of the new primary one by one: until every one of them
        names it, a client asking a lagging Sentinel is sent to the old primary's address."""
        named: list[int | None] = []
        for port in self.sentinel_ports:
            try:
                with redis.Redis(port=port, socket_timeout=2) as c:
                    _, primary = c.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER)
                    named.append(int(primary))
            except (redis.RedisError, TypeError, ValueError):
                named.append(None)
        return named

    def kill_primary(self) -> None:
        """SIGKILL the current primary (no shutdown, no last flush)."""
        self.primary.stop(kill=True)

    def promoted(self) -> RedisServer | None:
        """The replica the Sentinels name as the primary now, if one is."""
        port = self.primary_port()
        return next((r for r in self.replicas if r.port == port), None)

    def wait_promoted(self, timeout: float = 30.0) -> None:
        """Until the Sentinels name a replica as the primary and it accepts writes."""

        def done() -> bool:
            replica = self.promoted()
            if replica is None:
                return False
            with redis.Redis(port=replica.port, socket_timeout=2) as c:
                return c.info("replication").get("role") == "master"

        self._until(done, "replica promoted", timeout)

    def freeze_replicas(self) -> None:
        """SIGSTOP every replica: they hold their connections open and acknowledge nothing."""
        for replica in self.replicas:
            if replica.proc is not None:
                os.kill(replica.proc.pid, signal.SIGSTOP)

    def thaw_replicas(self) -> None:
        for replica in self.replicas:
            if replica.proc is not None:
                os.kill(replica.proc.pid, signal.SIGCONT)

    @staticmethod
    def _until(check: object, what: str, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if check():  # type: ignore[operator]
                    return
            except (redis.RedisError, OSError):
                pass
            time.sleep(0.05)
        raise RuntimeError(f"Redis Sentinel set-up: not {what} within {timeout} s")

    def stop(self) -> None:
        for proc in self.sentinels:
            proc.terminate()
        for proc in self.sentinels:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.sentinels = []
        self.thaw_replicas()
        for replica in self.replicas:
            replica.stop()
        self.primary.stop()
