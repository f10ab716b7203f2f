"""The campaign's operator replicas, and the nemesis that hurts them and what they depend on.

Every fault comes from one ``random.Random(seed)``, so a seed replays the same
schedule (the moments shift with the machine's speed, the choices do not).
Faults overlap: a new one starts every few seconds whatever is still going on,
but one target is hurt by one fault at a time. Each fault ends by itself
(a killed replica is started again, a stopped one continued, a frozen Redis
thawed), and :meth:`Nemesis.heal` ends any still in progress. Kinds:

* ``kill9`` / ``term`` — a replica SIGKILLed (no clean-up) or SIGTERMed, then
  started again under the same identity (a new process: a new epoch when it
  takes a lease again);
* ``pause`` — a replica SIGSTOPped past its lease TTL, then SIGCONTed (the
  frozen holder whose old epoch must be refused);
* ``redis_failover`` — the Redis primary SIGKILLed: the Sentinels promote a
  replica; the old primary is started again and rejoins as a replica;
* ``redis_freeze`` — one Redis replica SIGSTOPped for a while (``WAIT`` waits);
* ``apiserver_restart`` — kube-apiserver stopped and started (etcd keeps all);
* ``broker_drop`` — the account broker applies releases and drops the answer
  (an unknown outcome the controller must observe before sending again);
* ``etcd_restart`` — etcd stopped and started on the same data (the API
  server answers errors meanwhile); it and ``apiserver_restart`` share one
  target, so the control plane has one fault at a time;
* ``clock_skew`` — a replica restarted with its wall clock 20 to 120 s ahead or
  behind (Debian's libfaketime, ``LD_PRELOAD``; the monotonic clock moves
  with it by the same constant, so its timers stay sane), then restarted
  with the true clock. Skipped, and said so, where libfaketime is missing.

* ``redis_partition`` / ``api_partition`` — one replica cut off from every Redis
  server and Sentinel, or from the API server, for half a lease to three
  leases: its connections stay open and nothing goes through either way, so
  its calls hang until its own timeouts (a real toxiproxy between that replica
  and each server, :mod:`..faultproxy`; nothing of the product is told);
* ``redis_latency`` / ``api_latency`` — 50 to 400 ms (jittered by up to half)
  added each way on the same links, for 5 to 20 s.

The two Redis faults share one target too: a Sentinel set with two replicas
survives one failure at a time. A replica's links are targets of their own, so
a partition may overlap a kill, a pause or a Redis failover. The four network
kinds need root (iptables) and toxiproxy-server; elsewhere they are skipped and
counted as skipped, like ``clock_skew`` without libfaketime.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import random
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis as redis_py

from ..faultproxy import FaultProxy, Redirects
from ..redis_server import free_port

OPERATOR_SCRIPT = Path(__file__).resolve().parents[2] / "integration" / "operator" / "operator_process.py"
KINDS = (
    "kill9",
    "term",
    "pause",
    "redis_failover",
    "redis_freeze",
    "apiserver_restart",
    "broker_drop",
    "etcd_restart",
    "clock_skew",
    "redis_partition",
    "redis_latency",
    "api_partition",
    "api_latency",
)
NETWORK = ("redis_partition", "redis_latency", "api_partition", "api_latency")
#: Debian's libfaketime (the multi-threaded build: the operator runs threads), if installed.
FAKETIME = next(iter(sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1"))), None)


class Replica:
    """One operator process (the chart's RBAC, the control API on its own port), restartable."""

    def __init__(self, name: str, env: dict[str, str], logdir: Path, gid: int | None = None) -> None:
        self.name = name
        #: The group id the process runs under: the fault proxy's redirects pick its connections by it.
        self.gid = gid
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **env,
            "AGENTIHOOKS_OPERATOR_ID": name,
            "AGENTIHOOKS_CONTROL_HOST": "127.0.0.1",
            "AGENTIHOOKS_CONTROL_PORT": str(self.port),
            "AGENTIHOOKS_API_ADVERTISE_URL": self.url,
        }
        self.log = logdir / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.skew_s = 0

    def start(self, skew_s: int = 0) -> None:
        """Start the process; ``skew_s``: its wall clock that many seconds off (libfaketime)."""
        env = dict(self.env)
        if skew_s and FAKETIME:
            env |= {"LD_PRELOAD": FAKETIME, "FAKETIME": f"{skew_s:+d}"}
        self.skew_s = skew_s
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, str(OPERATOR_SCRIPT)], env=env, stdout=log, stderr=log, group=self.gid
            )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: signal.Signals) -> None:
        if self.alive():
            assert self.proc is not None
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, sig)

    def stop(self) -> None:
        if self.proc is None:
            return
        self.signal(signal.SIGCONT)
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


class Nemesis:
    """Injects the faults of one seeded schedule until :meth:`heal`; ``record`` gets each one."""

    def __init__(
        self,
        rng: random.Random,
        *,
        replicas: list[Replica],
        redis: Any,
        plane: Any,
        broker: Any,
        lease_ms: int,
        record: Callable[[str, str], None],
        links: Links | None = None,
    ) -> None:
        self.rng, self.replicas, self.redis, self.plane, self.broker = rng, replicas, redis, plane, broker
        #: Each replica's proxied links to Redis and the API server (``None``: no network faults here).
        self.links = links
        self.lease_s = lease_ms / 1000
        self.record = record
        self.counts: Counter[str] = Counter()
        #: Faults this machine cannot inject (``clock_skew`` without libfaketime).
        self.skipped: Counter[str] = Counter()
        self._busy: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(self, until: float, gap: tuple[float, float] = (1.0, 4.0)) -> None:
        loop = asyncio.get_running_loop()
        while loop.time() < until:
            await asyncio.sleep(self.rng.uniform(*gap))
            kind = self.rng.choice(KINDS)
            target = self._target(kind)
            if target is None or target in self._busy:
                continue
            self._busy.add(target)
            task = asyncio.create_task(self._inject(kind, target))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _target(self, kind: str) -> str | None:
        if kind in ("kill9", "term", "pause", "clock_skew"):
            return self.rng.choice(self.replicas).name
        if kind in ("redis_failover", "redis_freeze"):
            return "redis"  # one Redis fault at a time (below)
        if kind in ("apiserver_restart", "etcd_restart"):
            return "control-plane"
        if kind in NETWORK:  # a replica's links to one side: a target of their own
            return f"{kind.split('_', maxsplit=1)[0]}-link:{self.rng.choice(self.replicas).name}"
        return "broker"

    async def _inject(self, kind: str, target: str) -> None:
        if (kind == "clock_skew" and FAKETIME is None) or (kind in NETWORK and self.links is None):
            self._busy.discard(target)
            self.skipped[kind] += 1
            return
        try:
            self.counts[kind] += 1
            self.record(kind, target)
            await getattr(self, f"_{kind}")(target)
        finally:
            self._busy.discard(target)

    def _replica(self, name: str) -> Replica:
        return next(r for r in self.replicas if r.name == name)

    async def _kill9(self, name: str) -> None:
        replica = self._replica(name)
        replica.signal(signal.SIGKILL)
        await asyncio.sleep(self.rng.uniform(0.5, 3.0))
        await asyncio.to_thread(self._restart, replica)

    async def _term(self, name: str) -> None:
        replica = self._replica(name)
        await asyncio.to_thread(replica.stop)
        await asyncio.sleep(self.rng.uniform(0.5, 2.0))
        await asyncio.to_thread(self._restart, replica)

    @staticmethod
    def _restart(replica: Replica) -> None:
        if replica.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                replica.proc.wait(10)
        replica.start()

    async def _pause(self, name: str) -> None:
        replica = self._replica(name)
        replica.signal(signal.SIGSTOP)
        try:
            await asyncio.sleep(self.lease_s * self.rng.uniform(1.2, 2.5))
        finally:
            replica.signal(signal.SIGCONT)

    def _servers(self) -> list[Any]:
        return [self.redis.primary, *self.redis.replicas]

    async def _settled_primary(self) -> int:
        """The primary's port once every Sentinel names it and it answers as a primary. Targets are
        chosen from that, not from one Sentinel's view: a lagging Sentinel names a deposed primary,
        and the freeze meant for a replica would then stop the real primary."""
        await self._until(lambda: self._agreed() is not None)
        port = await asyncio.to_thread(self._agreed)
        return port if port is not None else await asyncio.to_thread(self.redis.primary_port)

    def _agreed(self) -> int | None:
        named = self.redis.primaries()
        if None in named or len(set(named)) != 1 or named[0] is None:
            return None
        with redis_py.Redis(port=named[0], socket_timeout=1) as c:
            return named[0] if c.info("replication").get("role") == "master" else None

    async def _redis_failover(self, _: str) -> None:
        port = await self._settled_primary()
        server = next(s for s in self._servers() if s.port == port)
        await asyncio.to_thread(server.stop, kill=True)
        await asyncio.sleep(self.rng.uniform(1.0, 4.0))
        # Started again only once every Sentinel names the same other primary. The old primary comes
        # back empty (no persistence here) and answers as a primary until the Sentinels make it a
        # replica; a Sentinel still naming it would send clients to that empty server (a lease
        # epoch read there is 0: the campaign's observer saw such one-read "islands"). Redis's own
        # advice for primaries without persistence: never restart one before the failover is done.
        await self._until(lambda: _moved_on(self.redis.primaries(), port))
        await asyncio.to_thread(server.start)  # it rejoins; the Sentinels make it a replica
        await self._until(lambda: _synced(server.port))

    async def _redis_freeze(self, _: str) -> None:
        port = await self._settled_primary()
        server = self.rng.choice([s for s in self._servers() if s.port != port])
        if server.proc is None or server.proc.poll() is not None:
            return
        os.kill(server.proc.pid, signal.SIGSTOP)
        try:
            await asyncio.sleep(self.rng.uniform(1.0, 4.0))
        finally:
            os.kill(server.proc.pid, signal.SIGCONT)
        await self._until(lambda: _synced(server.port))

    @staticmethod
    async def _until(check: Callable[[], bool], timeout: float = 60.0) -> bool:
        """Until ``check`` holds. Redis faults never overlap, and each ends only once its server is in
        sync again: a Sentinel set with two replicas survives one failure at a time, and a replica
        promoted in the middle of its full resynchronisation would come up empty (Redis's own hazard,
        not the product's)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            with contextlib.suppress(Exception):
                if await asyncio.to_thread(check):
                    return True
            await asyncio.sleep(0.2)
        return False

    async def _clock_skew(self, name: str) -> None:
        replica = self._replica(name)
        skew = self.rng.choice((-1, 1)) * self.rng.randint(20, 120)
        await asyncio.to_thread(replica.stop)
        await asyncio.to_thread(replica.start, skew)
        try:
            await asyncio.sleep(self.rng.uniform(10.0, 30.0))
        finally:
            await asyncio.to_thread(replica.stop)
            await asyncio.to_thread(replica.start)

    async def _redis_partition(self, target: str) -> None:
        await self._cut(target, self.lease_s * self.rng.uniform(0.5, 3.0))

    async def _api_partition(self, target: str) -> None:
        await self._cut(target, self.lease_s * self.rng.uniform(0.5, 3.0))

    async def _redis_latency(self, target: str) -> None:
        await self._slow(target)

    async def _api_latency(self, target: str) -> None:
        await self._slow(target)

    async def _cut(self, target: str, seconds: float) -> None:
        assert self.links is not None
        side, _, replica = target.partition("-link:")
        await asyncio.to_thread(self.links.cut, replica, side)
        try:
            await asyncio.sleep(seconds)
        finally:
            await asyncio.to_thread(self.links.heal, replica, side)

    async def _slow(self, target: str) -> None:
        assert self.links is not None
        side, _, replica = target.partition("-link:")
        ms = self.rng.randint(50, 400)
        await asyncio.to_thread(self.links.latency, replica, side, ms, self.rng.randint(0, ms // 2))
        try:
            await asyncio.sleep(self.rng.uniform(5.0, 20.0))
        finally:
            await asyncio.to_thread(self.links.heal, replica, side)

    async def _etcd_restart(self, _: str) -> None:
        await asyncio.to_thread(self.plane.restart_etcd, self.rng.uniform(0.2, 2.0))

    async def _apiserver_restart(self, _: str) -> None:
        await asyncio.to_thread(self.plane.restart_apiserver, self.rng.uniform(0.2, 2.0))

    async def _broker_drop(self, _: str) -> None:
        self.broker.mode = "drop"
        try:
            await asyncio.sleep(self.rng.uniform(1.0, 4.0))
        finally:
            self.broker.mode = "normal"

    async def heal(self) -> None:
        """Let every fault in progress end (each ends by itself), then make sure all is up again."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=60)
        for replica in self.replicas:
            replica.signal(signal.SIGCONT)
            if replica.alive() and replica.skew_s:
                await asyncio.to_thread(replica.stop)
            if not replica.alive():
                await asyncio.to_thread(replica.start)
        self.broker.mode = "normal"
        if self.links is not None:
            await asyncio.to_thread(self.links.heal_all)
        # The heal ends once the Redis set is whole again: every Sentinel names one primary that answers
        # as one, and every other server is its replica, linked and loaded (as after each Redis fault).
        # Before, a failover still unsettled failed the campaign's own final reads, and a primary with
        # no replica yet refuses the product's writes (it waits for one, ``not_replicated``): liveness
        # is judged from a heal, not from the middle of Redis's own recovery.
        if not await self._until(self._whole, timeout=180.0):
            raise HealError(f"the Redis set was not whole 180 s after the heal: {self._roles()}")

    def _whole(self) -> bool:
        primary = self._agreed()
        return primary is not None and all(_synced(s.port) for s in self._servers() if s.port != primary)

    def _roles(self) -> str:
        """Each Redis server's replication role and link, and whom each Sentinel names, for a report."""
        out = []
        for server in self._servers():
            try:
                with redis_py.Redis(port=server.port, socket_timeout=1) as c:
                    info = c.info("replication")
                role, link = info.get("role"), info.get("master_link_status", "-")
                out.append(f"{server.port} {role} link {link} replicas {info.get('connected_slaves', 0)}")
            except Exception as e:
                out.append(f"{server.port} {type(e).__name__}")
        return "; ".join(out) + f"; Sentinels name {self.redis.primaries()}"


class HealError(RuntimeError):
    """The faults were healed, but a part the campaign hurt did not come back whole."""


class Links:
    """Every replica's proxied links: ``side`` ``redis`` (each Redis server and Sentinel) or ``api``."""

    def __init__(self, proxy: FaultProxy, redirects: Redirects) -> None:
        self.proxy, self.redirects = proxy, redirects
        self._names: dict[tuple[str, str], list[str]] = {}

    def wire(self, replica: Replica, side: str, ports: list[int]) -> None:
        """Route ``replica``'s connections to each of ``ports`` through a proxy of their own."""
        assert replica.gid is not None
        for port in ports:
            name = f"{replica.name}-{side}-{port}"
            self.redirects.route(replica.gid, port, self.proxy.add(name, port))
            self._names.setdefault((replica.name, side), []).append(name)

    def cut(self, replica: str, side: str) -> None:
        for name in self._names.get((replica, side), []):
            self.proxy.cut(name)

    def latency(self, replica: str, side: str, ms: int, jitter_ms: int) -> None:
        for name in self._names.get((replica, side), []):
            self.proxy.latency(name, ms, jitter_ms)

    def heal(self, replica: str, side: str) -> None:
        for name in self._names.get((replica, side), []):
            self.proxy.heal(name)

    def heal_all(self) -> None:
        self.proxy.heal_all()


def _synced(port: int) -> bool:
    """The server at ``port`` is a replica whose link to its primary is up and loaded."""
    with redis_py.Redis(port=port, socket_timeout=1) as c:
        info = c.info("replication")
    return bool(
        info.get("role") == "slave"
        and info.get("master_link_status") == "up"
        and not info.get("master_sync_in_progress")
    )


def _moved_on(named: list[int | None], old: int) -> bool:
    """Whether every Sentinel answered and names one and the same primary, other than ``old``."""
    return None not in named and len(set(named)) == 1 and named[0] != old
