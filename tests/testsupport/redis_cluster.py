"""A real three-primary Redis Cluster on loopback, built in about a second.

The recovery core promises that every key of a swarm shares one hash slot (the
``{swarm}`` tag), so its scripts and pipelines run on a Redis Cluster as they
do on one server. Proving that needs a real cluster: three ``redis-server``
processes in cluster mode, slots assigned with ``CLUSTER ADDSLOTSRANGE`` and
joined with ``CLUSTER MEET`` (faster than ``redis-cli --cluster create``,
which waits in whole seconds). No replicas: failover is Sentinel's test.
"""

from __future__ import annotations

import random
import socket
import time
from pathlib import Path

import redis
from redis.cluster import RedisCluster

from .redis_server import RedisServer

SLOTS = 16384


def cluster_port() -> int:
    """A free port whose cluster-bus port (``port + 10000``) is free too and below 65536 (the
    kernel's ephemeral ports, where ``free_port`` lands, are often too high for a bus port)."""
    for _ in range(200):
        port = random.randint(20000, 40000)
        try:
            for p in (port, port + 10000):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port pair for a Redis Cluster node")


class RedisClusterProcesses:
    """``size`` primaries sharing the 16384 slots evenly; ``url`` is a ``redis+cluster://`` seed."""

    def __init__(self, workdir: Path, size: int = 3) -> None:
        if size < 1:
            raise ValueError("a cluster needs at least one primary")
        self.nodes = [
            RedisServer(
                workdir / f"node-{i}",
                appendonly=False,
                port=cluster_port(),
                extra_args=[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    str(workdir / f"node-{i}" / "nodes.conf"),
                    "--cluster-node-timeout",
                    "5000",
                ],
            )
            for i in range(size)
        ]

    @property
    def url(self) -> str:
        """The seed the operator is given (``AGENTIHOOKS_REDIS_URL``); any node would do."""
        return f"redis+cluster://127.0.0.1:{self.nodes[0].port}/0"

    def admin(self, i: int) -> redis.Redis:
        """A plain (non-cluster) connection to node ``i``, for CLUSTER commands and raw replies."""
        return redis.Redis(port=self.nodes[i].port, socket_timeout=5)

    def start(self) -> None:
        for node in self.nodes:
            node.start()
        per = SLOTS // len(self.nodes)
        for i in range(len(self.nodes)):
            first = i * per
            last = SLOTS - 1 if i == len(self.nodes) - 1 else first + per - 1
            with self.admin(i) as c:
                c.execute_command("CLUSTER", "ADDSLOTSRANGE", first, last)
        with self.admin(0) as c:
            for node in self.nodes[1:]:
                c.execute_command("CLUSTER", "MEET", "127.0.0.1", node.port)
        self.wait_ok()

    def wait_ok(self, timeout: float = 20.0) -> None:
        """Until every node says ``cluster_state:ok`` and knows every other node."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(self._ok(i) for i in range(len(self.nodes))):
                return
            time.sleep(0.05)
        raise RuntimeError(f"the Redis Cluster did not form within {timeout} s")

    def _ok(self, i: int) -> bool:
        with self.admin(i) as c:
            info = c.execute_command("CLUSTER", "INFO")
            text = info.decode() if isinstance(info, bytes) else str(info)
            fields = dict(line.split(":", 1) for line in text.split() if ":" in line)
            return fields.get("cluster_state") == "ok" and fields.get("cluster_known_nodes") == str(
                len(self.nodes)
            )

    def node_id(self, i: int) -> str:
        with self.admin(i) as c:
            return str(c.execute_command("CLUSTER", "MYID").decode())

    def owner_of(self, key: str, *, asking: int = 0) -> int:
        """The index of the node serving ``key``'s slot, as node ``asking`` sees it."""
        with self.admin(asking) as c:
            slot = int(c.execute_command("CLUSTER", "KEYSLOT", key))
            for first, last, primary, *_ in c.execute_command("CLUSTER", "SLOTS"):
                if int(first) <= slot <= int(last):
                    return [n.port for n in self.nodes].index(int(primary[1]))
        raise RuntimeError(f"no node serves slot {slot}")

    def migrate_slot(self, key: str, source: int, target: int) -> None:
        """Move ``key``'s whole slot, keys and all, from node ``source`` to ``target`` (the standard
        IMPORTING/MIGRATING/MIGRATE/SETSLOT NODE sequence), telling every node the new owner."""
        with self.admin(source) as src, self.admin(target) as dst:
            slot = int(src.execute_command("CLUSTER", "KEYSLOT", key))
            dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", self.node_id(source))
            src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", self.node_id(target))
            while True:
                names = src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100)
                if not names:
                    break
                src.execute_command(
                    "MIGRATE", "127.0.0.1", self.nodes[target].port, "", 0, 5000, "KEYS", *names
                )
            owner = self.node_id(target)
            for i in range(len(self.nodes)):
                with self.admin(i) as c:
                    c.execute_command("CLUSTER", "SETSLOT", slot, "NODE", owner)

    def flush(self) -> None:
        for i in range(len(self.nodes)):
            with self.admin(i) as c:
                c.flushall()

    def client(self) -> RedisCluster:
        return RedisCluster(host="127.0.0.1", port=self.nodes[0].port, socket_timeout=10)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
