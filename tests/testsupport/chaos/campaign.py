"""A fault campaign: operator replicas under a seeded nemesis, seats failing at random, a master deciding.

On the real control plane (the chart's RBAC for every replica) with Redis under
Sentinel (a primary, two replicas, three Sentinels) and a real HTTP account
broker. Swarms' seats run on a simulated kubelet's Node and fail at random
(``oom_killed``, ``application_exit``, ``evicted``); a simulated master posts
decisions for fenced attempts to any replica's control API (resume, fresh,
repeated, conflicting, to a replica that does not hold the swarm). The nemesis
(:mod:`.nemesis`) hurts replicas, Redis and the API server meanwhile.

Each Running seat Pod has a seat agent (:mod:`.agents`): the worker's own lease
code renewing through the control API, and model requests while it holds the
lease. The worker side is hurt too: a worker cut off from every controller
(``worker_cut``), and a whole node cut off (``node_cut``: its kubelet stops
heartbeating, so the real node lifecycle controller marks it Unknown and the
operator fences ``node_lost``; its workers' renewals time out, their agents keep
running until their leases stop them). The loopback model API's log goes into
the history, and the checker's ``two_live_agents`` judges it.

Everything goes into one history (:mod:`.history`): lease observations with
the takeovers the replicas counted, every Pod create and delete from the audit
log (its labels from the request body), the broker's releases, the master's
decisions with their results, the faults, the heal, and once the liveness
bound has passed after the heal, each swarm's final state and its guarded
writes (fences and decisions with their epochs and times). :mod:`.checker`
then judges it.

``python -m testsupport.chaos.campaign --seed 7 --minutes 30 --replicas 3``
(from ``tests/``) runs one with a control plane of its own; the test tier runs
a short one on the session's (tests/integration/chaos).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import random
import re
import secrets
import signal
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import redis
from agentihooks_operator.recovery.store.keys import SwarmKeys

from .. import faultproxy
from .. import kubelet as kl
from ..broker import running_broker
from ..faultproxy import FaultProxy, Redirects
from ..model_api import ModelApi
from ..node import RealKubelet
from ..processes import kill_own, owned_run
from ..realcluster import RealCluster
from ..redis_sentinel import MASTER, RedisSentinelProcesses
from .agents import SeatAgent, credential, requests
from .checker import Violation, check
from .history import Entry, Fault, Final, Heal, Lease, Op, Pod, Release, Request, SeatState, Write, dump
from .nemesis import HealError, Links, Nemesis, Replica

#: Two simulated nodes: while one is cut off, replacements run on the other.
NODES = ("chaos-node-0", "chaos-node-1")
#: Each seat's worker lease (the smallest a Swarm accepts), and how soon a NotReady node is node_lost.
WORKER_LEASE_S = 15
#: Longer than the blips a loaded machine gives a simulated kubelet (a heartbeat held up a few seconds
#: while the API server restarts), shorter than a real cut (8-45 s): 2 s fenced Pods of healthy nodes.
NODE_LOST_AFTER_S = 5
LEASE_MS = 2000
#: Replica i runs under group id REPLICA_GID + i (its uid stays root): the redirects pick its
#: connections by that id.
REPLICA_GID = 61100
FAILURES = {"oom_killed": kl.oom_killed, "application_exit": kl.application_exit, "evicted": kl.evicted}
LABEL = "swarm.agentihooks.io/"
#: The line a replica logs as it counts a takeover (``LeaseChurn.took``, the metric's counter).
TOOK = re.compile(
    r"recovery of swarm [^/\s]+/(\S+): (\S+) took the lease at epoch (\d+)( \(not yet confirmed)?"
)
#: A take the replicas confirmed after it was logged unconfirmed (the same take, not a new one).
CONFIRMED_LATER = "(now confirmed)"
#: A take whose answer was lost: the replica cannot know whether it moved the epoch, and says so.
UNANSWERED = re.compile(r"recovery of swarm [^/\s]+/(\S+): \S+'s take of the lease got no answer")


@dataclass
class Settings:
    seed: int
    seconds: float
    replicas: int = 3
    swarms: int = 3
    seats: int = 2
    #: After the heal, how long every seat has to be live again or waiting for a decision.
    liveness_bound_s: float = 45.0
    #: Redis replicas every guarded write waits for (``AGENTIHOOKS_REDIS_WAIT_REPLICAS``). 2, all of
    #: them: with 1 of 2, seed 7's 30 minutes saw a failover promote the replica without the newest
    #: writes (lease epochs went back, fences accepted under a lost epoch; docs/reliability.md).
    wait_replicas: int = 2
    #: Partitions and latency between each replica and Redis / the API server through a real TCP fault
    #: proxy, where the machine can (root, iptables, toxiproxy-server: :mod:`..faultproxy`).
    network: bool = True
    #: Seat agents (worker leases and model requests) and the worker-side partitions.
    agents: bool = True
    #: ``False``: a broken worker whose agent runs on after its lease stopped it (``--ignore-lease``),
    #: to see the checker catch the overlaps that follow.
    obey_lease: bool = True


@dataclass
class Report:
    history: Path
    entries: int
    faults: Counter[str]
    failures: Counter[str]
    decisions: Counter[str]
    violations: list[Violation] = field(default_factory=list)
    #: Faults the machine could not inject (``clock_skew`` without libfaketime), by kind.
    skipped: Counter[str] = field(default_factory=Counter)
    #: The campaign's own errors (a bug of the test harness, not of the product).
    errors: list[str] = field(default_factory=list)
    #: How each decision was answered, by choice and answer (``fresh 409 already_decided``).
    answers: Counter[str] = field(default_factory=Counter)
    #: Seconds from a seat's failure to its replacement Pod's create: swarms that decide by themselves,
    #: and swarms whose master decides (the master's own delay included).
    recovery_auto: list[float] = field(default_factory=list)
    recovery_decided: list[float] = field(default_factory=list)
    #: Failures with no replacement by the end (still waiting for a decision, or not a seat's Pod).
    unreplaced: int = 0
    #: Seconds from the heal until every seat was live or waiting for a decision.
    settled_after_heal: float | None = None
    #: Seconds the heal took once the last fault ended (the Redis set whole again among it).
    heal_s: float | None = None
    #: Times a node looked lost after the heal (its heartbeats held up: :meth:`Campaign._settle`).
    flaps: int = 0
    #: Why no network fault could be injected (``None``: they were among the kinds).
    network_off: str | None = None
    #: Model requests the seats' agents sent, and how many attempts sent them.
    requests: int = 0
    speakers: int = 0


def takes_of(logs: list[str]) -> tuple[dict[str, set[int]], set[tuple[str, int]]]:
    """From the replicas' logs: each swarm's epochs taken, and the (swarm, epoch) pairs every take of
    which the Redis replicas confirmed.

    An epoch number can be taken more than once: a take the replicas did not confirm is lost in a
    failover, and the next take makes the same number again (found in a CI run of seed 3: replica-0
    took epoch 2 unconfirmed, a failover lost it, replica-2 took epoch 2 and had it confirmed). An
    observation of that number cannot say which take it saw, so a fall back from it breaks nothing
    unless every take of it was confirmed. A ``(now confirmed)`` line confirms its replica's latest
    take of that epoch; any other line is a take of its own."""
    counted: dict[str, set[int]] = defaultdict(set)
    takes: dict[tuple[str, int], list[bool]] = defaultdict(list)
    for text in logs:
        latest: dict[tuple[str, int], int] = {}  # this replica's latest take of (swarm, epoch)
        for line in text.splitlines():
            found = TOOK.search(line)
            if found is None:
                continue
            swarm, _, raw, unconfirmed = found.groups()
            key = (swarm, int(raw))
            counted[swarm].add(int(raw))
            if CONFIRMED_LATER in line and key in latest:
                takes[key][latest[key]] = True
                continue
            takes[key].append(not unconfirmed)
            latest[key] = len(takes[key]) - 1
    return counted, {key for key, confirmed in takes.items() if all(confirmed)}


def spec(i: int, seats: int, broker_url: str) -> dict[str, Any]:
    return {
        "image": "ghcr.io/agentihooks/worker:2.1.0",
        "harness": {"name": "claude", "command": ["claude", "-p", "work"]},
        "seats": [
            {"name": f"s{j}", "project": "github.com/acme/app", "task": {"id": f"t-{i}-{j}", "text": "work"}}
            for j in range(seats)
        ],
        # the first swarm decides by itself; the others wait for the master
        "recovery": {
            "automation": i == 0,
            "imagePullGraceSeconds": 120,
            "passIntervalSeconds": 0.5,
            "workerLeaseSeconds": WORKER_LEASE_S,
        },
        "accountBroker": {"url": broker_url, "timeoutSeconds": 2},
    }


class Campaign:
    def __init__(self, settings: Settings, cluster: RealCluster, workdir: Path) -> None:
        self.s = settings
        # one generator each, so the nemesis's schedule does not depend on how the others interleave
        self.rng = random.Random(settings.seed)
        self.world_rng = random.Random(f"world-{settings.seed}")
        self.cut_rng = random.Random(f"workers-{settings.seed}")
        self.master_rng = random.Random(f"master-{settings.seed}")
        self.cluster = cluster
        self.workdir = workdir
        self.t0 = time.time()
        self.entries: list[Entry] = []
        self.names = [f"cw{i}" for i in range(settings.swarms)]
        self.keys = {n: SwarmKeys("agentihooks", n, cluster.namespace) for n in self.names}
        self.token = secrets.token_urlsafe(24)
        self.failures: Counter[str] = Counter()
        self.decisions: Counter[str] = Counter()
        self.replicas: list[Replica] = []
        self._busy: set[str] = set()
        #: Each seat failure the world injected: (time, Pod name, reason).
        self.failed: list[tuple[float, str, str]] = []
        self.settled_after_heal: float | None = None
        self.heal_s: float | None = None
        self.flaps = 0
        self.flapping: set[str] = set()
        #: The campaign's own errors (not the product's): printed with the report.
        self.errors: list[str] = []
        #: The replicas' proxied links (``None``: no network faults; ``network_off`` says why).
        self.links: Links | None = None
        self.network_off: str | None = None
        #: Each Running seat Pod's agent, by Pod name; the nodes cut off now; their agents' exits that
        #: their kubelet could not report yet.
        self.agents: dict[str, SeatAgent] = {}
        self.cut_nodes: set[str] = set()
        self._unreported: set[str] = set()
        self.worker_faults: Counter[str] = Counter()
        self.model = ModelApi()

    def now(self) -> float:
        return max(0.0, time.time() - self.t0)

    def add(self, entry: Entry) -> None:
        """Append ``entry``; its line number is the one it gets in the history file."""
        self.entries.append(entry.model_copy(update={"line": len(self.entries) + 1}))

    # -- the run ---------------------------------------------------------------------------------
    async def run(self) -> Report:
        redis_dir = self.workdir / "redis"
        sentinel = RedisSentinelProcesses(redis_dir)
        await asyncio.to_thread(sentinel.start)
        kubelet = RealKubelet(self.cluster.plane, self.cluster.namespace, status_beats=1)
        self.kubelet = kubelet
        kubelet.before_stop = self._container_stops
        await asyncio.to_thread(self.model.start)
        proxy, redirects = FaultProxy(self.workdir / "logs"), Redirects()
        self.network_off = faultproxy.unavailable() if self.s.network else "turned off (Settings.network)"
        try:
            if self.network_off is None:
                await asyncio.to_thread(proxy.start)
                await asyncio.to_thread(redirects.start)
                self.links = Links(proxy, redirects)
            with running_broker() as broker:
                await self._run(sentinel, kubelet, broker)
        finally:
            for agent in list(self.agents.values()):
                await asyncio.to_thread(agent.close)
            for replica in self.replicas:
                await asyncio.to_thread(replica.stop)
            await kubelet.close()
            await asyncio.to_thread(self.model.stop)
            await asyncio.to_thread(sentinel.stop)
            await asyncio.to_thread(redirects.stop)
            await asyncio.to_thread(proxy.stop)
        return self._report(broker)

    def _wire(self, sentinel: RedisSentinelProcesses) -> None:
        """Each replica's links to every Redis server and Sentinel and to the API server, proxied."""
        if self.links is None:
            return
        redis_ports = [s.port for s in (sentinel.primary, *sentinel.replicas)] + list(sentinel.sentinel_ports)
        for replica in self.replicas:
            self.links.wire(replica, "redis", redis_ports)
            self.links.wire(replica, "api", [self.cluster.plane.port])

    async def _run(self, sentinel: RedisSentinelProcesses, kubelet: RealKubelet, broker: Any) -> None:
        self.sentinel = redis.sentinel.Sentinel(
            [("127.0.0.1", p) for p in sentinel.sentinel_ports], socket_timeout=1
        )
        env = {
            **os.environ,
            "KUBECONFIG": str(self.cluster.kubeconfig),
            "AGENTIHOOKS_REDIS_URL": sentinel.url,
            "AGENTIHOOKS_REDIS_WAIT_REPLICAS": str(self.s.wait_replicas),
            "AGENTIHOOKS_NAMESPACES": self.cluster.namespace,
            "AGENTIHOOKS_SCAN_NAMESPACES": "false",
            "AGENTIHOOKS_LEASE_MS": str(LEASE_MS),
            "AGENTIHOOKS_RETRY_DELAY_SECONDS": "0.5",
            "AGENTIHOOKS_OPERATOR_TOKEN": self.token,
            "AGENTIHOOKS_PLACEMENT_HEARTBEAT_SECONDS": "0.5",
            "AGENTIHOOKS_PLACEMENT_HOLD_SECONDS": "2",
            "AGENTIHOOKS_NODE_LOST_AFTER_SECONDS": str(NODE_LOST_AFTER_S),
        }
        logs = self.workdir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        gids = [REPLICA_GID + i if self.links is not None else None for i in range(self.s.replicas)]
        self.replicas = [Replica(f"replica-{i}", env, logs, gids[i]) for i in range(self.s.replicas)]
        for replica in self.replicas:  # launch records name a control API: workers then hold a lease
            replica.env["AGENTIHOOKS_CONTROL_URL"] = replica.url
        self._wire(sentinel)
        for replica in self.replicas:
            replica.start()
        for node in NODES:
            await kubelet.put_node(node)
        for i, name in enumerate(self.names):
            await self.cluster.create_swarm(name, spec(i, self.s.seats, broker.url))
        nemesis = Nemesis(
            self.rng,
            replicas=self.replicas,
            redis=sentinel,
            plane=self.cluster.plane,
            broker=broker,
            lease_ms=LEASE_MS,
            record=lambda kind, target: self.add(
                Fault(t=self.now(), kind="fault", fault=kind, target=target)
            ),
            links=self.links,
        )
        self.nemesis = nemesis
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        faults_from = asyncio.Event()
        self.loop = loop
        helpers = [
            asyncio.create_task(self._world(kubelet, stop, faults_from)),
            asyncio.create_task(self._master(stop)),
            asyncio.create_task(self._leases(stop)),
        ]
        try:
            await self._steady()  # every seat Running before the first fault or failure
            self.until = loop.time() + self.s.seconds
            faults_from.set()
            partitions = asyncio.create_task(self._partitions())
            await nemesis.run(self.until)
            await partitions  # each ends by itself, and heals what it cut
            healing = loop.time()
            try:
                await nemesis.heal()
            except HealError as e:
                self.errors.append(str(e))  # liveness cannot be judged: no heal entry, no final state
            else:
                self.heal_s = loop.time() - healing
                self.add(Heal(t=self.now(), kind="heal"))
                self.settled_after_heal = await self._settle(self.s.liveness_bound_s)
                if self.flapping:  # liveness cannot be judged: no final state is taken
                    self.errors.append(
                        f"nodes {', '.join(sorted(self.flapping))} still looked lost "
                        f"{3 * self.s.liveness_bound_s:.0f} s after the heal (the machine held up their "
                        "kubelet's heartbeats): liveness cannot be judged"
                    )
                else:
                    await self._final()
        finally:
            stop.set()
            await asyncio.gather(*helpers, return_exceptions=True)
        for agent in list(self.agents.values()):
            await asyncio.to_thread(agent.close)
        self._count_takeovers()
        self._pods()
        self._releases(broker)
        swarm_of = {e.attempt: e.swarm for e in self.entries if isinstance(e, Pod)}
        for entry in requests(self.model, swarm_of, self.t0):
            self.add(entry)

    # -- the world: the kubelet's part and the failures ------------------------------------------
    async def _steady(self, timeout: float = 180.0) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        want = self.s.swarms * self.s.seats
        while loop.time() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                pods = await self.cluster.pods()
                if sum((p.get("status") or {}).get("phase") == "Running" for p in pods) >= want:
                    return
            await asyncio.sleep(0.5)
        raise RuntimeError(f"campaign set-up: not every one of the {want} seats ran within {timeout:.0f} s")

    async def _world(self, kubelet: RealKubelet, stop: asyncio.Event, faults_from: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        next_failure = 0.0
        tasks: set[asyncio.Task[None]] = set()
        while not stop.is_set():
            await asyncio.sleep(0.3)
            try:
                pods = await self.cluster.pods()
            except httpx.HTTPError:
                continue
            running = []
            for pod in pods:
                name, phase = pod["metadata"]["name"], (pod.get("status") or {}).get("phase")
                node = (pod.get("spec") or {}).get("nodeName")
                if node in self.cut_nodes:
                    continue  # its kubelet is cut off: nothing it runs is reported or started
                if phase == "Running":
                    running.append(name)
                elif phase in (None, "Pending") and name not in self._busy:
                    self._busy.add(name)
                    task = asyncio.create_task(self._start_pod(kubelet, pod))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
            self._gone({p["metadata"]["name"] for p in pods})
            if not faults_from.is_set() or not running or loop.time() < next_failure:
                continue
            if loop.time() < self.until:
                next_failure = loop.time() + self.world_rng.uniform(1.0, 3.0)
                reason = self.world_rng.choice(sorted(FAILURES))
                with contextlib.suppress(httpx.HTTPError, AssertionError):
                    victim = self.world_rng.choice(sorted(running))
                    self._kill_agent(victim)  # the container dies first; then its kubelet reports it
                    await kubelet.set_status(victim, FAILURES[reason]())
                    self.failures[reason] += 1
                    self.failed.append((self.now(), victim, reason))
        for task in tasks:
            task.cancel()

    async def _start_pod(self, kubelet: RealKubelet, pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        try:
            node = (pod.get("spec") or {}).get("nodeName") or await self._schedulable()
            if node is None:
                return  # no node takes Pods now: it stays Pending, as with a scheduler

            await asyncio.wait_for(kubelet.set_status(name, kl.running(), node_name=node), 30)
            if self.s.agents and name not in self.agents:
                await self._start_agent(pod, node)
        except (httpx.HTTPError, AssertionError, TimeoutError):
            pass  # deleted meanwhile, or the API server was down: the next look tries again
        finally:
            self._busy.discard(name)

    async def _schedulable(self) -> str | None:
        """A node the scheduler would bind to: not cut off, Ready, with no NoSchedule or NoExecute
        taint (the node lifecycle controller's ``unreachable``/``not-ready`` taints); ``None``: none."""
        fit = []
        for node in sorted(set(NODES) - self.cut_nodes):
            got = await self.cluster.get(f"/api/v1/nodes/{node}")
            if got is None:
                continue
            conditions = (got.get("status") or {}).get("conditions") or []
            ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
            taints = (got.get("spec") or {}).get("taints") or []
            if ready and not any(t.get("effect") in ("NoSchedule", "NoExecute") for t in taints):
                fit.append(node)
        return self.world_rng.choice(fit) if fit else None

    # -- the seats' agents (:mod:`.agents`) --------------------------------------------------------
    async def _start_agent(self, pod: dict[str, Any], node: str) -> None:
        """The worker of a Pod that just started: its credential and lease from the attempt's Secret."""
        attempt = _labels(pod).get("execution-id")
        if not attempt:
            return
        secret = await self.cluster.get(
            f"/api/v1/namespaces/{self.cluster.namespace}/secrets/swarm-{attempt}-credential"
        )
        if secret is None:
            return  # fenced meanwhile (the fence deletes it): the container would not start
        token, seconds = credential(secret)
        if seconds is None:
            self.errors.append(f"agents: the launch record of {attempt} has no worker lease")
            return
        name = pod["metadata"]["name"]
        agent = SeatAgent(
            pod=name, node=node, attempt=attempt, token=token, lease_seconds=seconds,
            urls=lambda: [r.url for r in self.replicas if r.alive()], model_url=self.model.base_url,
            on_exit=self._exited, seed=f"{self.s.seed}-{name}", obey_lease=self.s.obey_lease,
        )  # fmt: skip
        self.agents[name] = agent
        agent.start()

    def _kill_agent(self, name: str) -> None:
        agent = self.agents.get(name)
        if agent is not None:
            agent.kill()

    async def _container_stops(self, pod: dict[str, Any]) -> None:
        """The kubelet finishes a deleted Pod: its container gets stopped (before its exit is written)."""
        self._kill_agent(pod["metadata"]["name"])

    def _gone(self, names: set[str]) -> None:
        """Pods removed at once (a forced delete) on a live node: their containers are stopped too."""
        for name, agent in list(self.agents.items()):
            if name not in names and agent.node not in self.cut_nodes:
                agent.kill()

    def _exited(self, agent: SeatAgent) -> None:
        """An agent stopped by its worker (lease ran out, fenced, none acquired): from its thread."""
        asyncio.run_coroutine_threadsafe(self._report_exit(agent), self.loop)

    async def _report_exit(self, agent: SeatAgent) -> None:
        if agent.node in self.cut_nodes:
            self._unreported.add(agent.pod)  # its kubelet reports it once the node is back
            return
        with contextlib.suppress(httpx.HTTPError, AssertionError):
            await self.kubelet.set_status(agent.pod, kl.application_exit(agent.exit_code or 70))

    async def _node_back(self, node: str, timeout: float = 120.0) -> None:
        """The node's kubelet heartbeating again, tried until the API server answers (it may be down
        for a fault of its own): a heal that fails would leave the node cut off for good."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                await self.kubelet.put_node(node)
                return
            except httpx.HTTPError:
                if loop.time() > deadline:
                    raise
                await asyncio.sleep(0.5)

    # -- worker-side partitions --------------------------------------------------------------------
    async def _partitions(self) -> None:
        """Until the faults end: a worker cut off from every controller, or a whole node cut off."""
        if not self.s.agents:
            return
        loop = asyncio.get_running_loop()
        tasks: list[asyncio.Task[None]] = []
        while loop.time() < self.until:
            await asyncio.sleep(self.cut_rng.uniform(6.0, 15.0))
            if loop.time() >= self.until:
                break
            if self.cut_rng.random() < 0.5 and not self.cut_nodes:
                tasks.append(asyncio.create_task(self._node_cut(self.cut_rng.choice(NODES))))
            else:
                live = sorted(
                    n for n, a in self.agents.items() if a.exit_code is None and not a.killed.is_set()
                )
                if live:
                    tasks.append(asyncio.create_task(self._worker_cut(self.cut_rng.choice(live))))
        await asyncio.gather(*tasks)

    def _fault(self, kind: str, target: str) -> None:
        self.worker_faults[kind] += 1
        self.add(Fault(t=self.now(), kind="fault", fault=kind, target=target))

    async def _worker_cut(self, name: str) -> None:
        """One worker's renewals time out for 4-30 s (its lease is 15 s: some outlast it)."""
        agent = self.agents[name]
        self._fault("worker_cut", name)
        agent.cut.set()
        try:
            await asyncio.sleep(self.cut_rng.uniform(4.0, 30.0))
        finally:
            agent.cut.clear()

    async def _node_cut(self, node: str) -> None:
        """A node cut off for 8-45 s: its kubelet stops heartbeating and reporting, its workers' renewals
        time out; its containers go on until their leases stop them. Then the node is back: its
        kubelet reports what happened meanwhile and finishes the deletions it missed."""
        self._fault("node_cut", node)
        self.cut_nodes.add(node)
        await self.kubelet.stop_heartbeat(node)
        on_node = [a for a in self.agents.values() if a.node == node]
        for agent in on_node:
            agent.cut.set()
        try:
            await asyncio.sleep(self.cut_rng.uniform(8.0, 45.0))
        finally:
            await self._node_back(node)
            for agent in on_node:
                agent.cut.clear()
            self.cut_nodes.discard(node)
            for name in sorted(self._unreported):
                agent = self.agents[name]
                if agent.node == node:
                    self._unreported.discard(name)
                    await self._report_exit(agent)

    # -- the master ------------------------------------------------------------------------------
    async def _master(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await asyncio.sleep(self.master_rng.uniform(0.5, 1.5))
            for swarm in self.names:
                try:
                    waiting = await asyncio.to_thread(self._waiting, swarm)
                except redis.RedisError:
                    continue
                except Exception as e:  # a bug of the campaign itself: reported, never silent
                    self.errors.append(f"master: {type(e).__name__}: {e}")
                    continue
                for eid, seat in waiting:
                    if self.master_rng.random() < 0.5:
                        await self._decide(swarm, seat, eid)

    def _waiting(self, swarm: str) -> list[tuple[str, str]]:
        """Fenced attempts whose decision is still pending, oldest first."""
        client = self.sentinel.master_for(MASTER, socket_timeout=1)
        keys = self.keys[swarm]
        fences = client.hgetall(keys.attempt_fences)
        recoveries = client.hgetall(keys.attempt_recoveries)
        modes = {k.decode(): json.loads(v).get("mode") for k, v in recoveries.items()}
        out = []
        for eid, raw in fences.items():
            e = eid.decode()
            if modes.get(e) in (None, "recovery_pending"):
                out.append((e, str(json.loads(raw)["seat"])))
        return sorted(out)

    async def _decide(self, swarm: str, seat: str, eid: str) -> None:
        choice = self.master_rng.choice(["resume", "fresh", "fresh"])
        await self._post(swarm, seat, eid, choice)
        roll = self.master_rng.random()
        if roll < 0.3:
            await self._post(swarm, seat, eid, choice)  # repeated
        elif roll < 0.5:
            await self._post(swarm, seat, eid, "resume" if choice == "fresh" else "fresh")  # conflicting

    async def _post(self, swarm: str, seat: str, eid: str, choice: str) -> None:
        replica = self.master_rng.choice(self.replicas)  # any replica: the holder, or one that forwards
        body = {"choice": choice, "agent": "operator"}
        t = self.now()
        try:
            async with httpx.AsyncClient(timeout=5) as http:
                r = await http.post(
                    f"{replica.url}/v1/executions/{eid}/restore-decision",
                    json=body,
                    headers={"Authorization": f"Bearer {self.token}"},
                )
        except httpx.ConnectError:
            result, answer = "refused", "not connected"  # never sent: nothing can have been applied
        except httpx.HTTPError as e:
            result, answer = "unknown", type(e).__name__
        else:
            # 202: recorded for the lease holder's next pass, which may still refuse it; 5xx: no telling
            result = (
                "ok"
                if r.status_code == 200
                else "unknown"
                if r.status_code in (202,) or r.status_code >= 500
                else "refused"
            )
            answer = f"{r.status_code} {_reason(r)}"
        self.decisions[f"{choice}:{result}"] += 1
        self.add(
            Op(
                t=t,
                kind="op",
                op="decision",
                swarm=swarm,
                seat=seat,
                attempt=eid,
                result=result,
                choice=choice,
                answer=answer,
            )
        )

    # -- observations ----------------------------------------------------------------------------
    async def _leases(self, stop: asyncio.Event) -> None:
        """The lease of every swarm as Redis holds it, each time it changes (takeovers filled in later)."""
        last: dict[str, tuple[str | None, int]] = {}
        while not stop.is_set():
            await asyncio.sleep(0.2)
            try:
                owners = await asyncio.to_thread(self._owners)
            except redis.RedisError:
                continue
            unanswered: Counter[str] | None = None
            for swarm, seen in owners.items():
                if last.get(swarm) != seen:
                    last[swarm] = seen
                    # the takes that got no answer up to now (read after the epoch: never too few)
                    unanswered = unanswered if unanswered is not None else self._unanswered()
                    self.add(Lease(t=self.now(), kind="lease", swarm=swarm, holder=seen[0], epoch=seen[1],
                                   takeovers=0, unanswered=unanswered[swarm]))  # fmt: skip

    def _unanswered(self) -> Counter[str]:
        found: Counter[str] = Counter()
        for replica in self.replicas:
            with contextlib.suppress(OSError):
                found.update(UNANSWERED.findall(replica.log.read_text(errors="replace")))
        return found

    def _count_takeovers(self) -> None:
        """Each lease observation gets the takeovers the replicas counted up to its epoch. A replica
        logs the line as it increments its ``agentihooks_lease_takeovers`` counter, and the log outlives
        a ``kill -9`` (the counter does not), so the count is read from every process's log."""
        logs: list[str] = []
        for replica in self.replicas:
            with contextlib.suppress(OSError):
                logs.append(replica.log.read_text(errors="replace"))
        counted, held_confirmed = takes_of(logs)
        for i, e in enumerate(self.entries):
            if isinstance(e, Lease):
                n = sum(1 for epoch in counted[e.swarm] if epoch <= e.epoch)
                held = e.epoch == 0 or (e.swarm, e.epoch) in held_confirmed
                self.entries[i] = e.model_copy(update={"takeovers": n, "confirmed": held})

    def _owners(self) -> dict[str, tuple[str | None, int]]:
        """Every swarm's lease holder and epoch, read in one round trip from the server the Sentinels
        name, and only if it is a primary with a replica attached. A primary deposed by a failover
        (frozen or killed, then back before every Sentinel learnt of the new one) still answers as a
        primary to a client a lagging Sentinel sends there, with the data it had when it stopped;
        its replicas have moved to the new primary. Such a read is skipped, as the product's own
        takes are unconfirmed there (no replica acknowledges them)."""
        client = self.sentinel.master_for(MASTER, socket_timeout=1)
        pipe = client.pipeline(transaction=False)
        pipe.execute_command("ROLE")
        swarms = list(self.keys)
        for swarm in swarms:
            pipe.get(self.keys[swarm].control_owner)
            pipe.get(self.keys[swarm].control_epoch)
        role, *values = pipe.execute()
        if _text(role[0]) != "master" or not role[2]:
            raise redis.ConnectionError("not a primary with a replica attached; read again later")
        out = {}
        for i, swarm in enumerate(swarms):
            raw, epoch = values[2 * i], values[2 * i + 1]
            holder = json.loads(raw)["owner"] if raw else None
            out[swarm] = (holder, int(epoch or 0))
        return out

    async def _final(self) -> None:
        pods = await self.cluster.items("pods")  # those being deleted too (never live; the report names them)
        states = await self._final_states(pods)
        for swarm in self.names:
            fences, decided, seats = states[swarm]
            for eid, f in fences.items():
                self.add(Write(t=self._at(f["fenced_at_ms"]), kind="write", swarm=swarm, what="fence",
                               epoch=f["controller_epoch"], accepted=True, attempt=eid))  # fmt: skip
            for eid, d in decided.items():
                if d.get("decided_at_ms") and d.get("controller_epoch") is not None:
                    self.add(Write(t=self._at(d["decided_at_ms"]), kind="write", swarm=swarm, what="decision",
                                   epoch=d["controller_epoch"], accepted=True, attempt=eid))  # fmt: skip
            decisions = {e: d["mode"] for e, d in decided.items() if d.get("mode") in ("resume", "fresh")}
            self.add(Final(t=self.now(), kind="final", swarm=swarm, fences=sorted(fences), seats=seats,
                           decisions=decisions))  # fmt: skip

    async def _final_states(
        self, pods: list[dict[str, Any]], timeout: float = 120.0
    ) -> dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, SeatState]]]:
        """Every swarm's :meth:`_states`, read again while the Sentinels have no primary to name (a
        failover a Sentinel still runs after the heal): the observer's read, not a verdict."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                client = self.sentinel.master_for(MASTER, socket_timeout=2)
                return {n: await asyncio.to_thread(self._states, n, pods, client) for n in self.names}
            except redis.RedisError:
                if loop.time() > deadline:
                    raise
                await asyncio.sleep(0.5)

    def _states(
        self, swarm: str, pods: list[dict[str, Any]], client: Any
    ) -> tuple[dict[str, Any], dict[str, Any], dict[str, SeatState]]:
        """The swarm's fences and decisions in Redis, and each seat's state (its live attempt, or
        whether a decision is pending for its newest generation)."""
        keys = self.keys[swarm]
        fences = {k.decode(): json.loads(v) for k, v in client.hgetall(keys.attempt_fences).items()}
        decided = {k.decode(): json.loads(v) for k, v in client.hgetall(keys.attempt_recoveries).items()}
        seats = {}
        for j in range(self.s.seats):
            seat = f"s{j}"
            seen = [p for p in pods if _labels(p).get("swarm") == swarm and _seat(p) == seat]
            mine = [p for p in seen if "deletionTimestamp" not in p["metadata"]]
            live = next((_labels(p)["execution-id"] for p in mine if _live(p)), None)
            newest = max((int(_labels(p)["generation"]) for p in mine), default=0)
            waiting = any(
                f["seat"] == seat and f["generation"] >= newest and decided.get(e, {}).get("mode") in
                (None, "recovery_pending") for e, f in fences.items()
            )  # fmt: skip
            seats[seat] = SeatState(
                live=live, pending_decision=waiting, seen=_seen(seen, fences, decided, seat)
            )
        return fences, decided, seats

    async def _settle(self, bound: float) -> float | None:
        """Seconds from the heal until every seat is live or waiting for a decision (None: not within
        ``bound``); the rest of the bound is then waited out, so the final state is taken after it.

        A node of the world that looks lost after the heal is a fault the campaign made without
        planning it: its kubelet's heartbeats were held up (a loaded machine; the test control plane
        calls a node silent for 4 s Unknown and taints it), and the product rightly fences its Pods
        ``node_lost`` and waits out their leases. It is recorded (``node_flap``), and once every node
        is Ready again a new heal entry starts the bound again (3 bounds at most in all). Before, such a
        flap 30 s after the heal left seats waiting for their old attempts' leases at the final look."""
        loop = asyncio.get_running_loop()
        start = first = loop.time()
        settled: float | None = None
        flapping: set[str] = set()
        while (loop.time() - start < bound or flapping) and loop.time() - first < 3 * bound:
            lost = await self._lost_nodes()
            if lost and not flapping:
                self.add(Fault(t=self.now(), kind="fault", fault="node_flap", target=",".join(sorted(lost))))
                self.flaps += 1
            elif flapping and not lost:
                self.add(Heal(t=self.now(), kind="heal"))
                start, settled = loop.time(), None
            flapping = lost
            if settled is None and not flapping:
                with contextlib.suppress(httpx.HTTPError, redis.RedisError):
                    pods = await self.cluster.items("pods")
                    client = self.sentinel.master_for(MASTER, socket_timeout=1)
                    states = [await asyncio.to_thread(self._states, n, pods, client) for n in self.names]
                    if all(s.live or s.pending_decision for _, _, seats in states for s in seats.values()):
                        settled = loop.time() - start
            await asyncio.sleep(0.5)
        self.flapping = flapping
        return settled

    async def _lost_nodes(self) -> set[str]:
        """The world's nodes (none is cut off now) that are not Ready or carry the node lifecycle
        controller's taints; an API server that does not answer shows none."""
        lost = set()
        for node in NODES:
            try:
                got = await self.cluster.get(f"/api/v1/nodes/{node}")
            except httpx.HTTPError:
                return set()
            conditions = ((got or {}).get("status") or {}).get("conditions") or []
            ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
            taints = ((got or {}).get("spec") or {}).get("taints") or []
            if got is not None and (not ready or any(t.get("effect") == "NoExecute" for t in taints)):
                lost.add(node)
        return lost

    def _at(self, ms: int) -> float:
        return max(0.0, ms / 1000 - self.t0)

    def _pods(self) -> None:
        """Every Pod create and delete the API server answered 2xx, from its audit log."""
        by_name: dict[str, dict[str, str]] = {}
        for e in self.cluster.plane.audit_events():
            ref = e.get("objectRef") or {}
            code = int((e.get("responseStatus") or {}).get("code") or 0)
            if (
                ref.get("resource") != "pods"
                or ref.get("subresource")
                or ref.get("namespace") != (self.cluster.namespace)
                or not 200 <= code < 300
                or e.get("verb") not in ("create", "delete")
            ):
                continue  # fmt: skip
            t = datetime.fromisoformat(e["stageTimestamp"].replace("Z", "+00:00")).timestamp() - self.t0
            user = str((e.get("user") or {}).get("username") or "")
            if e["verb"] == "create":
                meta = (e.get("requestObject") or {}).get("metadata") or {}
                name = str(
                    meta.get("name") or (e.get("responseObject") or {}).get("metadata", {}).get("name")
                )
                labels = {
                    k[len(LABEL) :]: v for k, v in (meta.get("labels") or {}).items() if k.startswith(LABEL)
                }
                labels["seat"] = str((meta.get("annotations") or {}).get(LABEL + "seat", ""))
                by_name[name] = labels
            else:
                name, labels = str(ref.get("name")), by_name.get(str(ref.get("name")), {})
            if "generation" not in labels:
                continue  # not a seat's Pod (or created before the campaign)
            pod = Pod(t=max(0.0, t), kind="pod", verb=e["verb"], swarm=labels["swarm"], seat=labels["seat"],
                      generation=int(labels["generation"]), attempt=labels["execution-id"], name=name,
                      user=user)  # fmt: skip
            self.add(pod)

    def _releases(self, broker: Any) -> None:
        """The broker's applied releases (slot = execution id); its clock is not kept, so at the end."""
        owner = {}
        for e in self.entries:
            if isinstance(e, Pod):
                owner[e.attempt] = e.swarm
        for slot, n in sorted(broker.applied.items()):
            for _ in range(n):
                self.add(Release(t=self.now(), kind="release", swarm=owner.get(slot, "?"), attempt=slot,
                                 target="account", applied=True))  # fmt: skip

    def _report(self, broker: Any) -> Report:
        path = self.workdir / f"history-{self.s.seed}.jsonl"
        path.write_text("".join(dump(self.entries)))
        faults = self.nemesis.counts + self.worker_faults
        report = Report(path, len(self.entries), faults, self.failures, self.decisions)
        report.violations = check(self.entries, liveness_bound_s=self.s.liveness_bound_s * 0.9)
        report.errors = list(self.errors)
        report.skipped = self.nemesis.skipped
        report.network_off = self.network_off
        report.settled_after_heal = self.settled_after_heal
        report.heal_s = self.heal_s
        report.flaps = self.flaps
        sent = [e for e in self.entries if isinstance(e, Request)]
        report.requests, report.speakers = len(sent), len({e.attempt for e in sent})
        self._recoveries(report)
        report.answers = Counter(
            f"{e.choice} {e.answer}" for e in self.entries if isinstance(e, Op) and e.op == "decision"
        )
        return report

    def _recoveries(self, report: Report) -> None:
        creates = [e for e in self.entries if isinstance(e, Pod) and e.verb == "create"]
        by_name = {e.name: e for e in creates}
        for t, name, _ in self.failed:
            pod = by_name.get(name)
            nxt = None
            if pod is not None:
                nxt = min(
                    (c.t for c in creates if (c.swarm, c.seat) == (pod.swarm, pod.seat)
                     and c.generation > pod.generation and c.t >= t - 0.5),
                    default=None,
                )  # fmt: skip
            if pod is None or nxt is None:
                report.unreplaced += 1
                continue
            bucket = report.recovery_auto if pod.swarm == self.names[0] else report.recovery_decided
            bucket.append(max(0.0, nxt - t))


def percentile(values: list[float], q: float) -> float | None:
    """The ``q`` quantile (nearest rank) of ``values``; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def _reason(r: httpx.Response) -> str:
    """The error code of an answer (``{"error": "not_pending", ...}``), or its status word."""
    try:
        body = r.json()
    except ValueError:
        return ""
    if not isinstance(body, dict):
        return ""
    error = body.get("error")
    if isinstance(error, dict):
        error = error.get("reason")
    return str(error or body.get("status") or "")


def _labels(pod: dict[str, Any]) -> dict[str, str]:
    return {
        k[len(LABEL) :]: v for k, v in (pod["metadata"].get("labels") or {}).items() if k.startswith(LABEL)
    }


def _seat(pod: dict[str, Any]) -> str:
    return str((pod["metadata"].get("annotations") or {}).get(LABEL + "seat", ""))


def _seen(pods: list[dict[str, Any]], fences: dict[str, Any], decided: dict[str, Any], seat: str) -> str:
    """The seat's newest Pods and fences in a few words, for a liveness violation's report."""
    out = []
    for p in sorted(pods, key=lambda p: int(_labels(p).get("generation") or 0))[-2:]:
        status = p.get("status") or {}
        term = next(
            (
                c["state"]["terminated"]
                for c in status.get("containerStatuses") or []
                if "terminated" in c.get("state", {})
            ),
            None,
        )
        ended = f" {term.get('reason')} {term.get('exitCode')}" if term else ""
        deleting = " deleting" if p["metadata"].get("deletionTimestamp") else ""
        gen, node = _labels(p).get("generation"), p["spec"].get("nodeName")
        out.append(f"pod gen {gen} {status.get('phase')}{ended}{deleting} on {node}")
    mine = sorted((f["generation"], e, f) for e, f in fences.items() if f.get("seat") == seat)
    for gen, e, f in mine[-2:]:
        mode = (decided.get(e) or {}).get("mode")
        out.append(f"fence gen {gen} {f.get('reason')} decided {mode}")
    return "; ".join(out) or "nothing"


def _live(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in (None, "Pending", "Running")


def summary(report: Report) -> str:
    lines = [
        f"history: {report.history} ({report.entries} entries)",
        "faults: " + ", ".join(f"{k} {v}" for k, v in sorted(report.faults.items())),
        *(
            ["not injectable here: " + ", ".join(f"{k} x{v}" for k, v in sorted(report.skipped.items()))]
            if report.skipped
            else []
        ),
        *([f"network faults off: {report.network_off}"] if report.network_off else []),
        "failures: " + ", ".join(f"{k} {v}" for k, v in sorted(report.failures.items())),
        "decisions: " + ", ".join(f"{k} {v}" for k, v in sorted(report.decisions.items())),
        _recovery("recovery (automated swarm)", report.recovery_auto),
        _recovery("recovery (master decides)", report.recovery_decided),
        f"failures not replaced by the end: {report.unreplaced}",
        f"model requests: {report.requests} from {report.speakers} attempts",
        "the heal took " + _seconds(report.heal_s),
        f"nodes that looked lost after the heal: {report.flaps}",
        "every seat live or waiting after the heal: "
        + (
            f"{report.settled_after_heal:.1f} s"
            if report.settled_after_heal is not None
            else "not within the bound"
        ),
        "answers: " + ", ".join(f"{k} x{v}" for k, v in sorted(report.answers.items())),
        f"violations: {len(report.violations)}",
        *(f"  {v}" for v in report.violations),
        *(f"campaign error: {e}" for e in report.errors[:20]),
    ]
    return "\n".join(lines)


def _seconds(value: float | None) -> str:
    return "not within the bound" if value is None else f"{value:.1f} s"


def _recovery(label: str, values: list[float]) -> str:
    p50, p99 = percentile(values, 0.5), percentile(values, 0.99)
    if p50 is None or p99 is None:
        return f"{label}: none"
    return f"{label}: n={len(values)} p50 {p50:.2f} s p99 {p99:.2f} s"


async def run_campaign(settings: Settings, plane: Any, helm: Any, workdir: Path) -> Report:
    """One campaign in a namespace of its own on ``plane`` (deleted afterwards). What a SIGKILLed
    earlier campaign left running is killed first, and everything this one starts is marked as its
    own (:func:`..processes.owned_run`)."""
    workdir.mkdir(parents=True, exist_ok=True)
    with owned_run() as swept:
        if swept:
            print(f"campaign: killed {len(swept)} processes a killed earlier run left", flush=True)
        cluster = RealCluster.create(plane, helm, workdir, prefix="chaos")
        try:
            return await Campaign(settings, cluster, workdir).run()
        finally:
            await cluster.close()


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


#: After SIGTERM, how long the campaign may take to unwind before what is left of it is killed.
UNWIND_S = 60.0
_unwinding = threading.Event()


def _interrupted(signum: int, _frame: Any) -> None:
    """SIGTERM unwinds the campaign like Ctrl-C, within :data:`UNWIND_S`. Unwinding alone was not
    enough: a thread of the nemesis restarting a replica carried on after the clean-up had stopped
    the replicas (that replica was left running), and a blocked thread could hold the exit for
    minutes (the run did not end 180 s after SIGTERM)."""
    if not _unwinding.is_set():
        _unwinding.set()
        threading.Thread(target=_last_resort, daemon=True).start()
    raise KeyboardInterrupt(f"signal {signum}")


def _last_resort() -> None:
    time.sleep(UNWIND_S)
    killed = kill_own()
    print(f"campaign: not unwound after {UNWIND_S:.0f} s; killed its {len(killed)} processes", flush=True)
    os._exit(130)


def main(argv: list[str] | None = None, default_minutes: float = 3.0) -> int:
    """The command: a control plane of its own, one campaign, the checker's verdict (exit 1 on any
    violation; the seed is printed first so a failure can be replayed)."""
    import argparse
    import tempfile

    from ..controlplane import control_plane
    from ..helm import make_helm
    from ..node import keep_node_alive
    from ..realcluster import install_crd

    parser = argparse.ArgumentParser(
        prog="bench/chaos.py", description="A seeded fault campaign and its checker."
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--minutes", type=float, default=default_minutes)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--swarms", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--wait-replicas", type=int, default=2, help="Redis replicas each write waits for")
    parser.add_argument(
        "--ignore-lease",
        action="store_true",
        help="a broken worker: agents run on after their lease stops them",
    )
    args = parser.parse_args(argv)
    # the seat agents run the worker's own code in this process: its retry notices are not the report's
    for name in ("agentihooks_worker", "agentihooks_checkpoint"):
        logging.getLogger(name).setLevel(logging.ERROR)
    settings = Settings(
        args.seed,
        args.minutes * 60,
        replicas=args.replicas,
        swarms=args.swarms,
        wait_replicas=args.wait_replicas,
        obey_lease=not args.ignore_lease,
    )
    work = args.workdir or Path(tempfile.mkdtemp(prefix=f"chaos-{args.seed}-"))
    signal.signal(signal.SIGTERM, _interrupted)  # unwinds like Ctrl-C: all it started is stopped
    print(
        f"campaign seed {args.seed}: {args.minutes} min, {args.replicas} replicas, work in {work}", flush=True
    )
    try:
        with owned_run(), control_plane(work / "control-plane") as plane:
            install_crd(plane)
            stop = keep_node_alive(plane, "steady-node")
            try:
                report = asyncio.run(run_campaign(settings, plane, make_helm(work / "helm"), work / "run"))
            finally:
                stop()
    finally:
        left = kill_own()  # anything still carrying this run's mark was left by its unwinding
        if left:
            print(f"campaign: killed {len(left)} of its processes left after the clean-up", flush=True)
    print(summary(report))
    return 1 if report.violations else 0


if __name__ == "__main__":
    raise SystemExit(main())
