"""Restore decisions, the pause switch, the superseded legacy spawn and a frozen lease holder,
on the real control plane with the real operator process (its control API served in-process).

* **A decision by the CLI** (``agentihooks swarm example restore-decision eng-1 fresh``, the real
  console script against the operator's control API) is recorded and applied by the lease
  holder's next pass; **a decision by the API** (``POST /v1/executions/{execution}/restore-decision``
  with the operator's token) is applied at once. Two **conflicting** decisions for one attempt
  (resume and fresh, sent together) are accepted once: the other is refused with the spec's
  ``no recovery decision is pending for this attempt``. **Repeating** the accepted decision, by
  the API or the CLI, returns the same decision and replacement and changes nothing: no second Pod,
  and the fence, decision, directive and ledger row stay byte for byte as they were.
* **Pause survives a restart**: paused through the API, the operator stopped and started again,
  a seat that would resume natively on its own (native checkpoint, the session it held) is fenced
  and released but waits; unpausing keeps the waiting attempt waiting (its state is kept) while
  automation is back: the replacement's own failure is then resumed natively without a choice.
* **The superseded legacy spawn**: a spawn marked superseded as a legacy specification that fails
  before it starts is replaced fresh without a choice while automation is on and not paused, and
  waits like any other failure when automation is off or paused.
* **Two operators, the lease holder frozen** (SIGSTOP) past the lease's TTL: the other takes the
  lease over (a higher epoch) and recovers a failure; once thawed (SIGCONT) the old holder keeps
  running and processing events but writes nothing (the audit log shows no write with its user
  agent from then on), and there is exactly one replacement. Where exactly the freeze lands is up
  to chance, so the worst place is also made deterministic: the holder's pass stalls after it
  renewed its lease and before it reads the Pods. The recovery core then refuses that pass, and
  the pass used to go on publishing anyway: a status computed from its stale view (epoch 0) that
  the new holder never rewrote, and Events for the new holder's work. It publishes nothing now.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import threading
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from agentihooks_checkpoint.directive import Continuity
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores.local import LocalStore
from agentihooks_operator.recovery import NOT_PENDING
from testsupport import kubelet as kl
from testsupport.checkpoints import BuiltCheckpoint, build_checkpoint
from testsupport.kube import eventually, operator_process, running_operator
from testsupport.node import RealKubelet as Kubelet
from testsupport.realcluster import RealCluster as Cluster
from testsupport.recovery import keys_of

from .conftest import swarm_spec
from .flows import NODE, choose, eid, fence, fenced, gen, launch_record, replacement, running_seat

WRITES = {"create", "patch", "update", "delete", "deletecollection"}
MERGE = {"Content-Type": "application/merge-patch+json"}
IMAGE_TAG = "2.1.0"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spec(seats: int = 1, **kw: Any) -> dict[str, Any]:
    spec = swarm_spec(seats, **kw)
    for seat in spec["seats"]:
        seat["project"] = "local:fixture"  # the checkpoints' project
    return spec


class Api:
    """The operator's control API, called with the operator's token."""

    def __init__(self, tmp_path: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = secrets.token_urlsafe(24)
        self.store_root = tmp_path / "checkpoints"
        self.store = LocalStore(self.store_root)
        self.tmp = tmp_path
        #: The namespace of the Swarm this API serves (known once an operator is started for it).
        self.namespace: str | None = None

    def env(self) -> dict[str, str]:
        return {
            "AGENTIHOOKS_CONTROL_HOST": "127.0.0.1",
            "AGENTIHOOKS_CONTROL_PORT": str(self.port),
            "AGENTIHOOKS_OPERATOR_TOKEN": self.token,
            "AGENTIHOOKS_CHECKPOINT_ROOT": str(self.store_root),
        }

    async def call(self, method: str, path: str, body: Any = None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.token}"}
        async with httpx.AsyncClient(base_url=self.url, timeout=30) as http:
            return await http.request(method, path, json=body, headers=headers)

    async def decide(self, execution_id: str, choice: str) -> httpx.Response:
        body = {"choice": choice, "agent": "operator"}
        return await self.call("POST", f"/v1/executions/{execution_id}/restore-decision", body)

    async def status(self) -> dict[str, Any] | None:
        """The swarm's status once the operator serves it with every seat launched."""
        try:
            r = await self.call("GET", "/v1/swarms/example/status")
        except httpx.HTTPError:
            return None
        body = r.json() if r.status_code == 200 else None
        return body if body and all(s["execution_id"] for s in body["seats"]) else None

    async def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The real ``agentihooks`` console script, with the URL and token from the environment."""
        env = {**os.environ, "AGENTIHOOKS_CONTROL_URL": self.url, "AGENTIHOOKS_TOKEN": self.token}
        return await asyncio.to_thread(
            subprocess.run, ["agentihooks", *args], env=env, capture_output=True, text=True, timeout=60
        )

    @contextlib.asynccontextmanager
    async def operator(self, cluster: Cluster, redis_url: str, operator_id: str) -> AsyncIterator[Any]:
        self.namespace = cluster.namespace
        async with operator_process(
            cluster, redis_url, self.tmp, operator_id=operator_id, extra_env=self.env()
        ) as proc:
            await eventually(self.status, timeout=60, what=f"{operator_id}'s control API serving the swarm")
            yield proc

    def checkpoint(
        self, seat_task: str, execution_id: str, name: str, generation: int = 1
    ) -> BuiltCheckpoint:
        return build_checkpoint(
            self.store,
            StoreScope(swarm="example", task_id=seat_task, task_generation=1, namespace=self.namespace),
            self.tmp / f"work-{name}",
            kind="claude",
            checkpoint_id=name,
            execution_id=execution_id,
            execution_generation=generation,
            compatibility_key=IMAGE_TAG,
        )


def _pod_of(pods: list[dict[str, Any]], task: str, generation: int) -> dict[str, Any] | None:
    return next(
        (
            p
            for p in pods
            if p["metadata"]["labels"]["swarm.agentihooks.io/task"] == task and gen(p) == generation
        ),
        None,
    )


async def _seat_pod(cluster: Cluster, task: str, generation: int) -> dict[str, Any]:
    async def find() -> dict[str, Any] | None:
        return _pod_of(await cluster.pods("example"), task, generation)

    return dict(await eventually(find, timeout=30, what=f"the Pod of task {task}, generation {generation}"))


async def _status(cluster: Cluster, **expected: object) -> bool:
    status = (await cluster.swarm("example")).get("status") or {}
    return all(status.get(k) == v for k, v in expected.items())


async def _card(cluster: Cluster, execution_id: str) -> dict[str, Any] | None:
    cards = ((await cluster.swarm("example")).get("status") or {}).get("handoffs") or []
    return next((c for c in cards if c["execution_id"] == execution_id), None)


async def _card_is(cluster: Cluster, execution_id: str, **expected: object) -> bool:
    card = await _card(cluster, execution_id)
    return card is not None and all(card.get(k) == v for k, v in expected.items())


def _heartbeat(client: redis.Redis, execution_id: str, session_id: str) -> None:
    """What the attempt's heartbeat records through the API: the native session it holds."""
    beat = {"session_id": session_id, "at_ms": int(time.time() * 1000)}
    client.hset(keys_of(client, "example").heartbeats, execution_id, json.dumps(beat))


def _records(client: redis.Redis, execution_id: str, task: str) -> dict[str, bytes | None]:
    """The fence, the decision (with its directive) and the ledger row of one fenced attempt."""
    return {
        "fence": client.hget(keys_of(client, "example").attempt_fences, execution_id),
        "decision": client.hget(keys_of(client, "example").attempt_recoveries, execution_id),
        "ledger": client.hget(keys_of(client, "example").ledger_tasks, task),
        "seat": client.hget(keys_of(client, "example").seats, "eng-2"),
    }


# -- decisions: CLI, API, conflicting, repeated --------------------------------------------------
async def test_decisions_by_cli_and_api_conflicting_and_repeated(
    cluster: Cluster, kubelet: Kubelet, redis_url: str, tmp_path: Path
) -> None:
    api = Api(tmp_path)
    client = redis.Redis.from_url(redis_url)
    await cluster.create_swarm("example", _spec(seats=2, interval=0.3))
    async with api.operator(cluster, redis_url, "op-a"):
        one, two = await _seat_pod(cluster, "t-1", 1), await _seat_pod(cluster, "t-2", 1)
        lost1, lost2 = eid(one), eid(two)
        for pod in (one, two):
            await kubelet.set_status(pod["metadata"]["name"], kl.running(), node_name=NODE)
        # eng-2's attempt has a checkpoint (but held no session): resume is possible, not automatic.
        built = await asyncio.to_thread(api.checkpoint, "t-2", lost2, "ckpt-2")
        for pod in (one, two):
            await kubelet.set_status(pod["metadata"]["name"], kl.oom_killed())
        await fenced(redis_url, "example", lost1)
        await fenced(redis_url, "example", lost2)
        await eventually(lambda: _status(cluster, awaitingDecision=2), what="both seats awaiting")
        assert await _card_is(cluster, lost2, resume_available=True, resume_label="Continue from context")

        # eng-1 by the CLI: recorded, applied by the next pass.
        done = await api.cli("swarm", "example", "restore-decision", "eng-1", "fresh")
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"recorded: fresh for seat eng-1 (execution {lost1})"), done.stdout
        second1 = await _seat_pod(cluster, "t-1", 2)
        launch = await launch_record(cluster, eid(second1))
        assert launch.restore is not None and launch.restore.recovery is Continuity.FRESH
        again = await api.cli("swarm", "example", "restore-decision", "eng-1", "fresh")
        assert again.returncode == 0, again.stderr
        assert f"already accepted: fresh for seat eng-1 -> replacement {eid(second1)}" in again.stdout
        other = await api.cli("swarm", "example", "restore-decision", "eng-1", "resume")
        assert other.returncode == 1
        assert other.stderr.strip() == f"error: {NOT_PENDING}"

        # eng-2 by the API: resume and fresh at once; exactly one is accepted.
        answers = await asyncio.gather(api.decide(lost2, "resume"), api.decide(lost2, "fresh"))
        assert sorted(a.status_code for a in answers) == [200, 409], [a.text for a in answers]
        won = next(a.json() for a in answers if a.status_code == 200)
        lost_answer = next(a.json() for a in answers if a.status_code == 409)
        assert won["status"] == "accepted" and won["replayed"] is False and won["decided_by"] == "operator"
        assert lost_answer["message"] == NOT_PENDING
        winner = won["decision"]
        loser = "fresh" if winner == "resume" else "resume"
        second2 = await _seat_pod(cluster, "t-2", 2)
        assert eid(second2) == won["replacement"]
        launch = await launch_record(cluster, eid(second2))
        assert launch.restore is not None
        if winner == "resume":
            assert launch.restore.recovery is Continuity.RECONSTRUCTED
            assert launch.restore.checkpoint_id == built.checkpoint_id == won["checkpoint"]
        else:
            assert launch.restore.recovery is Continuity.FRESH and won["checkpoint"] is None

        # Repeating the accepted decision, or choosing the other again, changes nothing.
        before = _records(client, lost2, "t-2")
        repeated = await api.decide(lost2, winner)
        assert repeated.status_code == 200
        body = repeated.json()
        assert body["replayed"] is True
        assert (body["decision"], body["replacement"], body["checkpoint"]) == (
            winner,
            won["replacement"],
            won["checkpoint"],
        )
        refused = await api.decide(lost2, loser)
        assert refused.status_code == 409 and refused.json()["message"] == NOT_PENDING
        by_cli = await api.cli("swarm", "example", "restore-decision", "eng-2", winner)
        assert f"already accepted: {winner} for seat eng-2 -> replacement {eid(second2)}" in by_cli.stdout
        assert _records(client, lost2, "t-2") == before
        await eventually(
            lambda: _card_is(cluster, lost2, binding="bound", successor=eid(second2)),
            what="eng-2's card bound",
        )

    pods = sorted(p["metadata"]["name"] for p in await cluster.pods("example"))
    assert pods == sorted([second1["metadata"]["name"], second2["metadata"]["name"]])
    assert cluster.count("create", "pods", second1["metadata"]["name"]) == 1
    assert cluster.count("create", "pods", second2["metadata"]["name"]) == 1
    assert cluster.count("create", "pods") == 4
    log = (tmp_path / "op-a.log").read_text()
    assert f"controller: the recovery request for {lost2} was refused: {NOT_PENDING}" in log
    client.close()


# -- pause survives a restart --------------------------------------------------------------------
async def test_pause_survives_an_operator_restart(
    cluster: Cluster, kubelet: Kubelet, redis_url: str, tmp_path: Path
) -> None:
    api = Api(tmp_path)
    client = redis.Redis.from_url(redis_url)
    await cluster.create_swarm("example", _spec(interval=0.3))
    async with api.operator(cluster, redis_url, "op-a"):
        first = await running_seat(cluster, kubelet, "example")
        lost = eid(first)
        built = await asyncio.to_thread(api.checkpoint, "t-1", lost, "ckpt-1")
        assert built.session_id is not None
        _heartbeat(client, lost, built.session_id)  # so an unpaused swarm would resume on its own
        r = await api.call("POST", "/v1/swarms/example/pause")
        assert r.status_code == 200 and r.json() == {"swarm": "example", "paused": True}
        await eventually(lambda: _status(cluster, paused=True), what="status paused")
    assert client.exists(keys_of(client, "example").recovery_paused), "the switch is kept in Redis"

    async with api.operator(cluster, redis_url, "op-b"):  # the restarted operator
        assert (await api.status() or {}).get("paused") is True
        await kubelet.set_status(first["metadata"]["name"], kl.oom_killed())
        record = await fenced(redis_url, "example", lost)
        owner = _owner(client)
        assert owner is not None and owner["owner"] == "op-b"
        assert record.native_session == built.session_id and record.controller_epoch == owner["epoch"]
        await eventually(
            lambda: _card_is(cluster, lost, binding="awaiting decision", resume_label="Resume native"),
            what="the seat waiting for a decision",
        )
        released = await eventually(
            lambda: (
                (f := fence(redis_url, "example", lost)) is not None and f.released == ["grant", "account"]
            ),
            what="the fenced attempt released",
        )
        assert released
        assert await _status(cluster, paused=True, awaitingDecision=1)
        assert await cluster.pods("example") == [], "nothing launched on its own while paused"

        r = await api.call("POST", "/v1/swarms/example/unpause")
        assert r.json() == {"swarm": "example", "paused": False}
        await eventually(lambda: _status(cluster, paused=False), what="status unpaused")
        # The attempt that failed while paused keeps waiting: its awaiting state is kept.
        assert await _status(cluster, awaitingDecision=1)
        assert await cluster.pods("example") == []
        assert cluster.count("create", "pods") == 1

        answer = await api.decide(lost, "resume")
        assert answer.status_code == 200, answer.text
        assert answer.json()["directive"]["recovery"] == "native"
        second = await replacement(cluster, "example", 2)
        launch = await launch_record(cluster, eid(second))
        assert launch.restore is not None and launch.restore.recovery is Continuity.NATIVE
        assert launch.restore.checkpoint_id == "ckpt-1"

        # Automation is back: the replacement's own failure resumes natively without a choice.
        await running_seat(cluster, kubelet, "example", generation=2)
        again = await asyncio.to_thread(api.checkpoint, "t-1", eid(second), "ckpt-2", 2)
        assert again.session_id is not None
        _heartbeat(client, eid(second), again.session_id)
        await kubelet.set_status(second["metadata"]["name"], kl.oom_killed())
        third = await replacement(cluster, "example", 3)
        launch = await launch_record(cluster, eid(third))
        assert launch.restore is not None and launch.restore.recovery is Continuity.NATIVE
        assert launch.restore.checkpoint_id == "ckpt-2"
        decision = json.loads(client.hget(keys_of(client, "example").attempt_recoveries, eid(second)))
        assert decision["decided_by"] == "automation"

    assert cluster.count("create", "pods") == 3
    client.close()


# -- the superseded legacy spawn -----------------------------------------------------------------
LEGACY = {"swarm.agentihooks.io/superseded": "legacy-specification"}
MODES = ["automation", "paused", "automation-off"]


@pytest.mark.parametrize("mode", MODES)
async def test_superseded_legacy_spawn(cluster: Cluster, kubelet: Kubelet, redis_url: str, mode: str) -> None:
    async with running_operator(cluster, redis_url, operator_id="op-a") as memo:
        await cluster.create_swarm("example", swarm_spec(automation=mode != "automation-off", interval=0.3))
        spawn = await eventually(lambda: cluster.pods("example"), what="the spawn's Pod")
        name, lost = spawn[0]["metadata"]["name"], eid(spawn[0])
        if mode == "paused":
            runner = await eventually(
                lambda: memo["passes"].get((cluster.namespace, "example")), what="the swarm's pass"
            )
            await asyncio.to_thread(runner.recovery.pause)
        # Marked superseded as a legacy specification while Pending; it fails before it ever ran.
        path = f"/api/v1/namespaces/{cluster.namespace}/pods/{name}"
        r = await cluster.http.patch(path, json={"metadata": {"annotations": LEGACY}}, headers=MERGE)
        r.raise_for_status()
        assert (await cluster.get(path) or {})["status"]["phase"] == "Pending"
        await kubelet.set_status(name, kl.terminated(64, "StartError"), node_name=NODE)

        record = await fenced(redis_url, "example", lost)
        assert record.superseded_legacy is True
        if mode == "automation":
            second = await replacement(cluster, "example", 2)  # nobody chose
            launch = await launch_record(cluster, eid(second))
            assert launch.restore is not None and launch.restore.recovery is Continuity.FRESH
            decision = await eventually(lambda: _decision(redis_url, lost), what="the automatic decision")
            assert decision["mode"] == "fresh" and decision["decided_by"] == "automation"
        else:
            await eventually(
                lambda: _card_is(cluster, lost, binding="awaiting decision"), what="the spawn waiting"
            )
            assert await cluster.pods("example") == [], "with automation off or paused it waits"
            assert (_decision(redis_url, lost) or {})["mode"] == "recovery_pending"
            assert choose(redis_url, "example", lost, "fresh")
            second = await replacement(cluster, "example", 2)
    assert [p["metadata"]["name"] for p in await cluster.pods("example")] == [second["metadata"]["name"]]
    assert cluster.count("create", "pods") == 2


def _decision(redis_url: str, execution_id: str) -> dict[str, Any] | None:
    client = redis.Redis.from_url(redis_url)
    try:
        raw = client.hget(keys_of(client, "example").attempt_recoveries, execution_id)
    finally:
        client.close()
    return json.loads(raw) if raw else None


# -- two operators, the lease holder frozen ------------------------------------------------------
def _owner(client: redis.Redis) -> dict[str, Any] | None:
    raw = client.get(keys_of(client, "example").control_owner)
    return json.loads(raw) if raw else None


def _handled_pod_events(log: Path) -> int:
    text = log.read_text(errors="replace") if log.exists() else ""
    return len(re.findall(r"Handler 'pod_changed' succeeded", text))


def _writes_by(cluster: Cluster, agent: str, since: datetime) -> list[tuple[str, str, str]]:
    out = []
    for e in cluster.plane.audit_events():
        if not str(e.get("userAgent") or "").startswith(agent) or e.get("verb") not in WRITES:
            continue
        if datetime.fromisoformat(e["requestReceivedTimestamp"]) >= since:
            ref = e.get("objectRef") or {}
            out.append((str(e["verb"]), str(ref.get("resource")), str(ref.get("name"))))
    return out


async def test_frozen_lease_holder_applies_nothing_after_it_thaws(
    cluster: Cluster, kubelet: Kubelet, redis_url: str, tmp_path: Path
) -> None:
    client = redis.Redis.from_url(redis_url)
    await cluster.create_swarm("example", swarm_spec(interval=0.3))
    async with (
        operator_process(cluster, redis_url, tmp_path, operator_id="op-a", lease_ms=2000) as a,
        operator_process(cluster, redis_url, tmp_path, operator_id="op-b", lease_ms=2000) as b,
    ):
        first = await running_seat(cluster, kubelet, "example")
        lost = eid(first)
        await eventually(lambda: _status(cluster, running=1), what="the seat running")
        held = await eventually(lambda: _owner(client), what="a lease holder")
        frozen_id = held["owner"]
        frozen, other_id = (a, "op-b") if frozen_id == "op-a" else (b, "op-a")
        frozen.send_signal(signal.SIGSTOP)
        try:
            taken = await eventually(
                lambda: (o := _owner(client)) is not None and o["owner"] == other_id and o,
                timeout=30,
                what=f"{other_id} taking the lease over once the frozen holder's TTL ran out",
            )
            assert taken["epoch"] > held["epoch"]
            await kubelet.set_status(first["metadata"]["name"], kl.oom_killed())
            record = await fenced(redis_url, "example", lost)
            assert record.controller_epoch == taken["epoch"]
            assert choose(redis_url, "example", lost, "fresh")
            second = await replacement(cluster, "example", 2)
            await running_seat(cluster, kubelet, "example", generation=2)
            await eventually(
                lambda: _status(cluster, running=1, awaitingDecision=0), what="replacement running"
            )
            assert second["metadata"]["annotations"]["swarm.agentihooks.io/operator-id"] == other_id
            log = tmp_path / f"{frozen_id}.log"
            seen_before = _handled_pod_events(log)
        finally:
            thawed = datetime.now(tz=UTC)
            frozen.send_signal(signal.SIGCONT)
        # Thawed, the old holder runs again: its next lease attempt finds the lease taken...
        await eventually(
            lambda: f"{frozen_id} lost the lease to {other_id}" in log.read_text(errors="replace"),
            timeout=60,
            what=f"{frozen_id} finding its lease gone",
        )
        # ...and it handles Pod events again, each of which starts a pass of its own.
        path = f"/api/v1/namespaces/{cluster.namespace}/pods/{second['metadata']['name']}"
        for poke in range(1, 4):
            note = {"metadata": {"annotations": {"test.agentihooks.io/poke": str(poke)}}}
            (await cluster.http.patch(path, json=note, headers=MERGE)).raise_for_status()
            await eventually(
                lambda n=poke: _handled_pod_events(log) >= seen_before + n,
                timeout=60,
                what=f"{frozen_id} handling Pod event {poke} after it thawed",
            )
        assert frozen.poll() is None, "the thawed operator keeps running"
        now = _owner(client)
        assert now is not None and (now["owner"], now["epoch"]) == (other_id, taken["epoch"])
        # It stops first, while the other still holds the lease (a stopping holder hands its lease
        # over, which would make the thawed one the holder again, rightly).
        frozen.terminate()
        assert await asyncio.to_thread(frozen.wait, 30) == 0

    # From the moment it thawed through to its exit, the old holder's own client wrote nothing.
    assert _writes_by(cluster, f"agentihooks-operator/{frozen_id}", thawed) == []
    assert cluster.calls_by(f"agentihooks-operator/{other_id}").count(("create", "", "pods")) == 1
    assert cluster.count("create", "pods", second["metadata"]["name"]) == 1
    assert cluster.count("create", "pods") == 2
    assert [p["metadata"]["name"] for p in await cluster.pods("example")] == [second["metadata"]["name"]]
    record = fence(redis_url, "example", lost)
    assert record is not None and record.released == ["grant", "account"]
    assert int(client.get(keys_of(client, "example").control_epoch)) == taken["epoch"]
    client.close()


async def test_holder_stalled_inside_a_pass_publishes_nothing_once_its_lease_is_gone(
    cluster: Cluster, kubelet: Kubelet, redis_url: str
) -> None:
    """The frozen holder's worst moment, made deterministic: its pass has taken (renewed) the lease
    and stalls before it reads the Pods; meanwhile the other replica takes over and recovers a
    failure. When the stalled pass goes on, the recovery core refuses it (the lease is gone), and
    the pass must then publish nothing: no status computed from its stale view, no Events."""
    client = redis.Redis.from_url(redis_url)
    key = (cluster.namespace, "example")
    async with (
        running_operator(cluster, redis_url, operator_id="op-a", lease_ms=2000) as a,
        running_operator(cluster, redis_url, operator_id="op-b", lease_ms=2000) as b,
    ):
        await cluster.create_swarm("example", swarm_spec(interval=0.3))
        first = await running_seat(cluster, kubelet, "example")
        lost = eid(first)
        await eventually(lambda: _status(cluster, running=1), what="the seat running")
        held = await eventually(lambda: _owner(client), what="a lease holder")
        holder_id = held["owner"]
        memo, other_id = (a, "op-b") if holder_id == "op-a" else (b, "op-a")
        runner = await eventually(lambda: memo["passes"].get(key), what="the holder's pass")
        reached, go = threading.Event(), threading.Event()
        read_pods = runner._pods

        def stalled() -> dict[str, dict[str, Any]]:
            if not reached.is_set():
                reached.set()
                go.wait(60)
            return read_pods()

        runner._pods = stalled
        await eventually(reached.is_set, what="the holder's pass stalled after it renewed its lease")
        last = memo["results"].get(key)
        try:
            taken = await eventually(
                lambda: (o := _owner(client)) is not None and o["owner"] == other_id and o,
                timeout=30,
                what=f"{other_id} taking the lease over",
            )
            await kubelet.set_status(first["metadata"]["name"], kl.oom_killed())
            await fenced(redis_url, "example", lost)
            assert choose(redis_url, "example", lost, "fresh")
            second = await replacement(cluster, "example", 2)
            await running_seat(cluster, kubelet, "example", generation=2)
            await eventually(lambda: _status(cluster, running=1, awaitingDecision=0), what="replaced")
        finally:
            resumed = datetime.now(tz=UTC)
            go.set()
        # The stalled pass ends, led by nobody; the replica keeps passing without the lease.
        await eventually(lambda: memo["results"].get(key) is not last, what="the stalled pass ending")
        result = memo["results"].get(key)
        assert result is None or not result.leader
        after = memo["passes"][key].recovery.writes_applied
        await eventually(lambda: memo["results"].get(key) is not result, what="a next pass")
        assert memo["passes"][key].recovery.writes_applied == after
        status = (await cluster.swarm("example"))["status"]
        assert status["controllerEpoch"] == taken["epoch"] and status["running"] == 1

    assert _writes_by(cluster, f"agentihooks-operator/{holder_id}", resumed) == []
    assert cluster.count("create", "pods", second["metadata"]["name"]) == 1
    assert cluster.count("create", "pods") == 2
    client.close()
