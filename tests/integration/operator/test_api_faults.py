"""Faults of the Kubernetes API under a recovery, on the real control plane.

* **kube-apiserver restarted mid-recovery** (etcd keeps every object): the
  operator is held at a named write point of the recovery (the fault hook of
  the in-process operator blocks there), the API server is stopped, the hook is
  released so the operator's next calls meet a server that is down, and the
  server comes back after a few seconds. The operator's client retries, kopf's
  watches reconnect, and the recovery finishes with exactly one replacement Pod
  and each release once. A second Swarm created after the restart is then
  launched and its Pod's status change is published with a ten-minute pass
  interval, which only the re-established watches can do. A restarted API
  server answers before its RBAC caches are filled and refuses (403) meanwhile:
  those refusals must all fall inside the outage, and were retried.

* **Status writes and 409 conflicts.** The pass's status writes (counts and
  handoff cards, ``k8s/swarmpass.py``) are JSON merge patches on
  ``swarms/status`` with no ``metadata.resourceVersion``, as are kopf's own: the
  API server applies them to whatever the object is, so they cannot meet a 409.
  The conditions are a list that several writers share (``k8s/conditions.py``):
  each of those writes carries the resourceVersion it read, and a 409 is redone
  from a fresh read so no writer drops another's condition. What a concurrent
  writer could do is take the operator's fields away; the test runs two of them
  all through a recovery (one merge-patching a field of its own in a loop, one
  doing read-modify-write PUTs of the whole status guarded by resourceVersion,
  which is the writer that meets the 409s) and shows that the operator's
  fields and conditions are all there and right at the end, that the other
  writers' field is kept too, and that only condition writes were ever refused.

* **An RBAC denial** (a rule taken out of the operator's Role): the refused call
  is reported by verb, resource and namespace (one line in the operator's log,
  and a ``Forbidden`` Warning Event on the Swarm), the pass is retried after a
  delay (the operator process keeps running), nothing is launched, the failed
  attempt is fenced and released once, and once the rule is back the seat is
  replaced exactly once.

* **A stale read**: a Node that registers (and gets the seat's Pod bound to it)
  between the pass's read of the Nodes and its read of the Pods; the running
  seat used to be fenced node_lost as if its Node were deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import socket
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from testsupport import kubelet as kl
from testsupport.kube import eventually, operator_process, running_operator
from testsupport.node import RealKubelet as Kubelet
from testsupport.realcluster import SWARMS
from testsupport.realcluster import RealCluster as Cluster
from testsupport.recovery import keys_of

from .conftest import swarm_spec
from .flows import choose, eid, fence, fenced, replacement, running_seat

MERGE = {"Content-Type": "application/merge-patch+json"}
RBAC = "/apis/rbac.authorization.k8s.io/v1"


# -- shared checks -------------------------------------------------------------------------------
def _audit(cluster: Cluster, verb: str, resource: str, name: str = "") -> list[int]:
    """Response codes of the operator's ``verb`` calls on ``resource`` (named ``name``, when given)."""
    codes = []
    for e in cluster.plane.audit_events():
        ref = e.get("objectRef") or {}
        res = ref.get("resource", "") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        if (e.get("user") or {}).get("username") != cluster.operator_user:
            continue
        if e.get("verb") == verb and res == resource and (not name or ref.get("name") == name):
            codes.append(int((e.get("responseStatus") or {}).get("code") or 0))
    return codes


def _fence_events(redis_url: str, execution_id: str) -> int:
    """How many ``fence`` entries the recovery core's event stream holds for ``execution_id``."""
    client = redis.Redis.from_url(redis_url)
    try:
        entries = client.xrange(keys_of(client, "example").recovery_events)
    finally:
        client.close()
    return sum(
        1
        for _, f in entries
        if f.get(b"type") == b"fence" and f.get(b"execution_id") == execution_id.encode()
    )


def _settled(client: redis.Redis, lost: str) -> None:
    """The fenced attempt's grant and account slot are released, each recorded once in the fence."""
    keys = keys_of(client, "example")
    assert client.hget(keys.account_slots, lost) == b"ended"
    assert json.loads(client.hget(keys.launch_grants, lost))["state"] == "revoked"


async def _status(cluster: Cluster, name: str = "example", **expected: object) -> bool:
    status = (await cluster.swarm(name)).get("status") or {}
    return all(status.get(k) == v for k, v in expected.items())


async def _awaiting(cluster: Cluster) -> bool:
    cards = ((await cluster.swarm("example")).get("status") or {}).get("handoffs") or []
    return bool(cards) and cards[0]["binding"] == "awaiting decision"


# -- a. kube-apiserver restarted mid-recovery ----------------------------------------------------
class Gate:
    """A fault hook that holds the operator's pass at ``point`` (its ``nth`` time) until opened."""

    def __init__(self, point: str, nth: int) -> None:
        self.point, self.nth = point, nth
        self.seen = 0
        self.reached = threading.Event()
        self.opened = threading.Event()

    def __call__(self, point: str) -> None:
        if point != self.point:
            return
        self.seen += 1
        if self.seen == self.nth:
            self.reached.set()
            self.opened.wait(120)  # bounded: a failing test must not hang the operator's shutdown


def _port_closed(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) != 0


@contextlib.contextmanager
def _client_retries() -> Iterator[list[str]]:
    """Collect the operator client's retry lines and its pass failures (proof the fault was met)."""
    seen: list[str] = []

    class Grab(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    grab = Grab(level=logging.INFO)
    watched = [logging.getLogger(n) for n in ("agentihooks_operator.k8s.client", "agentihooks.recovery")]
    levels = [lg.level for lg in watched]
    for lg in watched:
        lg.addHandler(grab)
        lg.setLevel(logging.INFO)
    try:
        yield seen
    finally:
        for lg, level in zip(watched, levels, strict=True):
            lg.removeHandler(grab)
            lg.setLevel(level)


async def _restart_api_server_while_held(cluster: Cluster, gate: Gate) -> tuple[datetime, datetime]:
    """Stop kube-apiserver with the operator held, let the operator go on while it is down, start it.

    Returns the outage: from the stop until the restarted server answered ``/readyz``.
    """
    plane = cluster.plane
    await eventually(gate.reached.is_set, timeout=60, what=f"the operator at {gate.point}")
    down = datetime.now(tz=UTC)
    await asyncio.to_thread(plane.stop_process, "kube-apiserver")
    assert _port_closed(plane.port), "kube-apiserver is down"
    try:
        gate.opened.set()  # the operator's next calls meet a server that is down
        await asyncio.sleep(3)  # down_seconds of restart_apiserver
    finally:
        await asyncio.to_thread(plane.start_apiserver)
        await asyncio.to_thread(plane.wait_ready)
    return down, datetime.now(tz=UTC)


async def _controllers_recovered(cluster: Cluster) -> None:
    """Wait until kube-controller-manager works again after the restart (the session shares it).

    Its watches were refused or cut while the API server restarted and come back with a backoff:
    a new namespace gets its default ServiceAccount, and the garbage collector deletes a
    ConfigMap whose owner was deleted, before the next test needs either.
    """
    http = cluster.http
    probe = f"probe-{uuid.uuid4().hex[:8]}"
    (await http.post("/api/v1/namespaces", json={"metadata": {"name": probe}})).raise_for_status()
    try:
        sa = f"/api/v1/namespaces/{probe}/serviceaccounts/default"
        await eventually(
            lambda: _exists(http, sa), timeout=180, interval=0.5, what="the ServiceAccount controller back"
        )
        cms = f"/api/v1/namespaces/{probe}/configmaps"
        owner = (await http.post(cms, json={"metadata": {"name": "owner"}})).json()
        ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
        body = {"metadata": {"name": "dependent", "ownerReferences": [ref]}}
        (await http.post(cms, json=body)).raise_for_status()
        (await http.delete(f"{cms}/owner")).raise_for_status()
        await eventually(
            lambda: _gone(http, f"{cms}/dependent"),
            timeout=180,
            interval=0.5,
            what="the garbage collector back",
        )
    finally:
        await http.delete(f"/api/v1/namespaces/{probe}")


async def _exists(http: httpx.AsyncClient, path: str) -> bool:
    return (await http.get(path)).status_code == 200


async def _gone(http: httpx.AsyncClient, path: str) -> bool:
    return (await http.get(path)).status_code == 404


def _denials(cluster: Cluster) -> list[tuple[datetime, tuple[str, str, str]]]:
    """When and what the API server refused the operator (403), from the audit log."""
    out = []
    for e in cluster.plane.audit_events():
        if (e.get("user") or {}).get("username") != cluster.operator_user or not e.get("objectRef"):
            continue
        if (e.get("responseStatus") or {}).get("code") == 403:
            ref = e["objectRef"]
            res = ref.get("resource", "") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
            when = datetime.fromisoformat(e["requestReceivedTimestamp"])
            out.append((when, (str(e["verb"]), str(ref.get("apiGroup") or ""), res)))
    return out


POINTS = [("after:fence", 1), ("before:launch", 2)]


def _outage_tolerant(spec: dict[str, Any]) -> dict[str, Any]:
    """The worker Pods tolerate their Node looking unreachable for ten minutes.

    The test control plane's node lifecycle is fast (a Node is unreachable 4 s after its last
    heartbeat, its Pods evicted 2 s later). While the API server restarts the kubelet cannot renew
    its Node lease either, and on a loaded machine the restart can take longer than that: the
    controller-manager would then evict the replacement, which is not the fault under test.
    """
    lasting = {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 600}
    tolerations = [{"key": f"node.kubernetes.io/{k}", **lasting} for k in ("unreachable", "not-ready")]
    return {**spec, "podTemplate": {"spec": {"tolerations": tolerations}}}


@pytest.mark.parametrize(("point", "nth"), POINTS, ids=[p for p, _ in POINTS])
async def test_api_server_restarted_mid_recovery(
    cluster: Cluster, kubelet: Kubelet, redis_url: str, point: str, nth: int
) -> None:
    client = redis.Redis.from_url(redis_url)
    gate = Gate(point, nth)
    try:
        with _client_retries() as lines:
            # A lease longer than the outage: the hold and the restart must not hand the swarm over.
            async with running_operator(cluster, redis_url, operator_id="op-a", faults=gate, lease_ms=60000):
                await cluster.create_swarm("example", _outage_tolerant(swarm_spec(interval=0.3)))
                first = await running_seat(cluster, kubelet, "example")
                lost = eid(first)
                await kubelet.set_status(first["metadata"]["name"], kl.oom_killed())
                if nth == 2:  # held in the replacement's launch: choose fresh (the CLI's way) to get there
                    await fenced(redis_url, "example", lost)
                    await eventually(lambda: _awaiting(cluster), what="awaiting decision")
                    assert choose(redis_url, "example", lost, "fresh")
                down, ready = await _restart_api_server_while_held(cluster, gate)
                if nth == 1:
                    await eventually(lambda: _awaiting(cluster), timeout=60, what="awaiting decision")
                    assert choose(redis_url, "example", lost, "fresh")
                second = await replacement(cluster, "example", 2)
                await running_seat(cluster, kubelet, "example", generation=2)
                await eventually(
                    lambda: _status(cluster, running=1, awaitingDecision=0, recovering=1),
                    timeout=60,
                    what="status after the restart",
                )
                # kopf's watches are back: a Swarm made now is seen (no timer finds new Swarms), and with a
                # ten-minute pass interval its Pod's status change is published only through the Pod watch.
                await cluster.create_swarm("later", swarm_spec(interval=600))
                later = await eventually(
                    lambda: cluster.pods("later"), timeout=60, what="the new Swarm's Pod"
                )
                await eventually(lambda: _status(cluster, "later", running=0), what="the new Swarm's status")
                await kubelet.set_status(later[0]["metadata"]["name"], kl.running(), node_name="kind-worker")
                await eventually(
                    lambda: _status(cluster, "later", running=1), what="a pass from the Pod watch"
                )
    finally:  # the session shares the control plane: leave it working
        await _controllers_recovered(cluster)

    # The outage was met: the client retried, or the pass failed and was run again.
    assert any("try 2 of" in line or "failed" in line for line in lines), lines
    # A restarted kube-apiserver serves requests before its RBAC caches are filled, and refuses them
    # (403) meanwhile: those are part of this fault and were retried. None came after /readyz.
    denials = _denials(cluster)
    assert all(down <= when <= ready for when, _ in denials), (down, ready, denials)
    cluster.expected_denials = {call for _, call in denials}  # type: ignore[attr-defined]
    record = fence(redis_url, "example", lost)
    assert record is not None and record.reason == "oom_killed" and record.generation == 1
    assert record.released == ["grant", "account"]
    assert _fence_events(redis_url, lost) == 1
    _settled(client, lost)
    pods = await cluster.pods("example")
    assert [p["metadata"]["name"] for p in pods] == [second["metadata"]["name"]]
    assert _audit(cluster, "create", "pods", second["metadata"]["name"]) == [201]
    assert cluster.count("create", "pods", "swarm-") == 3  # example's two generations and later's one
    card = (await cluster.swarm("example"))["status"]["handoffs"][0]
    assert card["execution_id"] == lost and card["successor"] == eid(second) and card["binding"] == "bound"
    assert cluster.plane.alive("kube-controller-manager")
    client.close()


# -- b. concurrent status writers ----------------------------------------------------------------
class StatusWriters:
    """Two other writers of the Swarm's status, running until stopped.

    ``patches``: merge patches of ``status.externalProbe`` (a field of their own) in a loop.
    ``puts``: read the Swarm, set ``status.externalCopy`` and PUT the whole status back with the
    resourceVersion it read (what a careful read-modify-write client does); a 409 means the object
    changed in between, so it reads again and retries. Any other answer is kept in ``errors``.
    """

    def __init__(self, cluster: Cluster, name: str) -> None:
        self.path = SWARMS.format(ns=cluster.namespace) + f"/{name}/status"
        self.http = cluster.plane.async_client()
        self.patches = 0
        self.puts = 0
        self.conflicts = 0
        self.errors: list[str] = []
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._patch()), asyncio.create_task(self._put())]

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks)
        await self.http.aclose()

    async def _patch(self) -> None:
        while not self._stop.is_set():
            body = {"status": {"externalProbe": self.patches + 1}}
            r = await self.http.patch(self.path, json=body, headers=MERGE)
            if r.status_code != 200:
                self.errors.append(f"PATCH {r.status_code} {r.text[:300]}")
            else:
                self.patches += 1
            await asyncio.sleep(0.03)

    async def _put(self) -> None:
        tries = 0
        while not self._stop.is_set():
            tries += 1
            doc = (await self.http.get(self.path)).json()
            if tries % 2:  # every other time, a window in which another writer changes the object
                await asyncio.sleep(0.1)
            doc.setdefault("status", {})["externalCopy"] = self.puts + 1
            r = await self.http.put(self.path, json=doc)
            if r.status_code == 409:
                self.conflicts += 1
            elif r.status_code != 200:
                self.errors.append(f"PUT {r.status_code} {r.text[:300]}")
            else:
                self.puts += 1


async def test_concurrent_status_writers_never_take_the_operators_fields(
    cluster: Cluster, kubelet: Kubelet, redis_url: str
) -> None:
    await cluster.create_swarm("example", swarm_spec(interval=0.3))
    writers = StatusWriters(cluster, "example")
    async with running_operator(cluster, redis_url, operator_id="op-a"):
        first = await running_seat(cluster, kubelet, "example")
        lost = eid(first)
        await eventually(lambda: _status(cluster, running=1), what="seat running")
        writers.start()
        try:
            await kubelet.set_status(first["metadata"]["name"], kl.oom_killed())
            await eventually(
                lambda: _status(cluster, running=0, awaitingDecision=1), what="awaiting decision"
            )
            assert await _awaiting(cluster)
            assert choose(redis_url, "example", lost, "fresh")
            second = await replacement(cluster, "example", 2)
            await running_seat(cluster, kubelet, "example", generation=2)
            await eventually(
                lambda: _status(cluster, running=1, awaitingDecision=0, recovering=1),
                what="replacement running",
            )
            # Keep both writers going until each has also been refused with a 409 at least once.
            await eventually(
                lambda: (writers.conflicts > 0 and writers.puts > 0) or writers.errors,
                what="a conflicting PUT",
            )
        finally:
            await writers.stop()
        status = (await cluster.swarm("example"))["status"]

    # The operator's fields: counts, epoch and the handoff card of the recovery, all as it wrote them.
    assert status["seats"] == 1 and status["running"] == 1 and status["awaitingDecision"] == 0
    assert status["recovering"] == 1 and status["held"] == 0 and status["paused"] is False
    assert status["controllerEpoch"] == 1 and status["foreignPods"] == 0
    [card] = status["handoffs"]
    assert card["execution_id"] == lost and card["successor"] == eid(second) and card["binding"] == "bound"
    assert any(c["type"] == "SpecValid" and c["status"] == "True" for c in status["conditions"])
    # ...and the other writers' fields beside them.
    assert status["externalProbe"] == writers.patches and status["externalCopy"] == writers.puts
    ready = {c["type"]: c for c in status["conditions"]}["Ready"]
    assert (ready["status"], ready["reason"]) == ("True", "Reconciled")
    # The pass's own status writes are merge patches with no precondition: never refused. Only a
    # condition write carries the resourceVersion it read; a 409 there is redone from a fresh read.
    codes = _audit(cluster, "patch", "swarms/status")
    assert codes.count(200) >= 3 and set(codes) <= {200, 409}, codes


# -- c. an RBAC denial ---------------------------------------------------------------------------
def _role_path(cluster: Cluster) -> str:
    role = next(d for d in cluster.rbac if d["kind"] == "Role")
    return f"{RBAC}/namespaces/{cluster.namespace}/roles/{role['metadata']['name']}"


async def _allowed(cluster: Cluster, verb: str, resource: str) -> bool:
    """What the API server's authorizer now answers for the operator (a SubjectAccessReview)."""
    ns = cluster.namespace
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": cluster.operator_user,
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"],
            "resourceAttributes": {"namespace": ns, "verb": verb, "resource": resource},
        },
    }
    r = await cluster.http.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", json=review)
    r.raise_for_status()
    return bool(r.json()["status"].get("allowed"))


async def _set_rules(cluster: Cluster, rules: list[dict[str, Any]]) -> None:
    r = await cluster.http.patch(_role_path(cluster), json={"rules": rules}, headers=MERGE)
    r.raise_for_status()


def _without(rules: list[dict[str, Any]], verb: str, resource: str) -> list[dict[str, Any]]:
    out = []
    for rule in rules:
        if resource in rule["resources"] and rule["apiGroups"] == [""]:
            out.append({**rule, "verbs": [v for v in rule["verbs"] if v != verb]})
        else:
            out.append(rule)
    return out


DENIALS = [("create", "pods"), ("create", "secrets")]


@pytest.mark.parametrize(("verb", "resource"), DENIALS, ids=[f"{v}-{r}" for v, r in DENIALS])
async def test_rbac_denial_is_named_retried_and_then_recovered_once(
    cluster: Cluster, kubelet: Kubelet, redis_url: str, tmp_path: Path, verb: str, resource: str
) -> None:
    ns = cluster.namespace
    cluster.expected_denials = {(verb, "", resource)}  # type: ignore[attr-defined]
    client = redis.Redis.from_url(redis_url)
    rules = (await cluster.http.get(_role_path(cluster))).json()["rules"]
    await cluster.create_swarm("example", swarm_spec(interval=0.3))
    async with operator_process(cluster, redis_url, tmp_path, operator_id="op-a") as op:
        first = await running_seat(cluster, kubelet, "example")
        lost = eid(first)
        await _set_rules(cluster, _without(rules, verb, resource))
        await eventually(lambda: _refused(cluster, verb, resource), what=f"{verb} {resource} refused")

        await kubelet.set_status(first["metadata"]["name"], kl.oom_killed())
        await fenced(redis_url, "example", lost)
        await eventually(lambda: _awaiting(cluster), what="awaiting decision")
        assert choose(redis_url, "example", lost, "fresh")
        attempt = await eventually(
            lambda: _attempt_of(client, "eng-1", lost), what="the replacement's execution id"
        )
        pod = f"swarm-{attempt}"

        # Refused, named, and tried again: at least three refusals while the process keeps running.
        await eventually(
            lambda: _audit(cluster, verb, resource).count(403) >= 3,
            timeout=60,
            what=f"the {verb} of {resource} refused and retried",
        )
        said = f"may not {verb} {resource} in namespace {ns}"
        await eventually(lambda: said in _log(tmp_path), what="the refusal in the operator's log")
        await eventually(lambda: _swarm_event(cluster, said), what="the refusal as an Event on the Swarm")
        assert op.poll() is None, "the operator process keeps running"

        async def ready(status: str, reason: str) -> dict[str, Any] | None:
            held = {c["type"]: c for c in (await cluster.swarm("example"))["status"]["conditions"]}
            got = held.get("Ready") or {}
            return got if (got.get("status"), got.get("reason")) == (status, reason) else None

        # Ready names the refusal too: what `kubectl get swarms`, Argo CD and Flux show.
        forbidden = await eventually(lambda: ready("False", "Forbidden"), what="Ready False: Forbidden")
        assert said in forbidden["message"]

        # The seat's card says the decision's replacement waits on the refusal (it read ``bound`` with
        # nothing beside it, though no replacement was running).
        async def blocked_card() -> bool:
            cards = ((await cluster.swarm("example")).get("status") or {}).get("handoffs") or []
            return bool(cards) and said in (cards[0].get("launch_blocked") or "")

        await eventually(blocked_card, what="the seat's card naming the blocked launch")
        [card] = (await cluster.swarm("example"))["status"]["handoffs"]
        assert card["successor"] == attempt and card["continuity"] == "pending"
        if resource == "pods":
            assert await cluster.pods("example") == []
            assert 201 not in _audit(cluster, "create", "pods", pod), "no replacement Pod was created"
        else:  # the Pod went out beside its Secret: without that a kubelet never starts it
            made = await cluster.get(f"/api/v1/namespaces/{ns}/pods/{pod}")
            assert made is not None and (made.get("status") or {}).get("phase", "Pending") == "Pending"
            assert await cluster.get(f"/api/v1/namespaces/{ns}/secrets/{pod}-credential") is None
        record = fence(redis_url, "example", lost)
        assert record is not None and record.released == ["grant", "account"]
        assert _fence_events(redis_url, lost) == 1

        await _set_rules(cluster, rules)
        second = await replacement(cluster, "example", 2)
        assert second["metadata"]["name"] == pod
        await running_seat(cluster, kubelet, "example", generation=2)
        await eventually(lambda: _status(cluster, running=1, awaitingDecision=0), what="replacement running")
        assert op.poll() is None

        async def unblocked() -> bool:
            [card] = (await cluster.swarm("example"))["status"]["handoffs"]
            return card.get("launch_blocked") is None and card["successor"] == attempt

        await eventually(unblocked, what="the card no longer naming a blocked launch")
        await eventually(lambda: ready("True", "Reconciled"), what="Ready True once the Role allows it")

    assert [p["metadata"]["name"] for p in await cluster.pods("example")] == [pod]
    assert [c for c in _audit(cluster, "create", "pods", pod) if c < 400] == [201]
    assert fence(redis_url, "example", lost) == record, "the fence is written once and never again"
    assert _fence_events(redis_url, lost) == 1
    assert fence(redis_url, "example", attempt) is None, "the replacement is not fenced"
    _settled(client, lost)
    log = _log(tmp_path)
    assert "Traceback" not in log, "a refusal is one clear line, not a stack trace"
    # Every failed pass was retried under the lease it held: one epoch all along (it was one more per
    # failed pass, each forcing a full resync, while the takeover counter stayed at 1).
    assert int(client.get(keys_of(client, "example").control_epoch)) == 1
    assert re.search(
        rf"recovery pass of {ns}/example failed: .*forbidden: the operator {re.escape(said)}", log
    )
    client.close()


async def _refused(cluster: Cluster, verb: str, resource: str) -> bool:
    return not await _allowed(cluster, verb, resource)


def _attempt_of(client: redis.Redis, seat: str, lost: str) -> str | None:
    raw = client.hget(keys_of(client, "example").seats, seat)
    current = raw.decode() if raw else None
    return current if current and current != lost else None


def _log(tmp_path: Path) -> str:
    return (tmp_path / "op-a.log").read_text(errors="replace")


async def _swarm_event(cluster: Cluster, text: str) -> bool:
    return any(
        e["involvedObject"]["kind"] == "Swarm" and text in e["message"] for e in await cluster.events()
    )


# -- a stale read: a Node that joins between the pass's reads ------------------------------------
async def test_a_pod_on_a_node_that_joined_between_the_reads_is_not_lost(
    cluster: Cluster, kubelet: Kubelet, redis_url: str
) -> None:
    """A pass lists the Nodes beside the Pods. A Node that registers, and gets the seat's Pod bound
    to it, after the Nodes were listed but before the Pods were is missing from the first list:
    the running Pod looked like one on a deleted Node and was fenced node_lost (a healthy seat
    killed). The pass reads the Pods only after the Nodes here (deterministically, through its two
    read methods), and the seat must stay running, unfenced."""
    key = (cluster.namespace, "example")
    async with running_operator(cluster, redis_url, operator_id="op-a") as memo:
        await cluster.create_swarm("example", swarm_spec(interval=0.3))
        [pod] = await eventually(lambda: cluster.pods("example"), what="the seat's Pod")
        name, execution = pod["metadata"]["name"], eid(pod)
        runner = await eventually(lambda: memo["passes"].get(key), what="the swarm's pass")
        read_nodes, read_pods = runner._nodes, runner._pods
        listed, go = threading.Event(), threading.Event()

        def nodes_first() -> Any:
            nodes = read_nodes()
            listed.set()
            return nodes

        def pods_after() -> Any:
            go.wait(60)  # the same pass listed the Nodes just before (nodes_first)
            return read_pods()

        runner._nodes, runner._pods = nodes_first, pods_after
        try:  # the Nodes are listed every quarter of node_lost_after_seconds (10 s here), not every pass
            await eventually(listed.is_set, timeout=60, what="a pass that listed the Nodes")
            await kubelet.set_status(name, kl.running(), node_name="joined-node")  # registers the Node
        finally:
            go.set()  # never leave a pass blocked (the operator could not stop)
        await eventually(lambda: _status(cluster, running=1), what="the seat seen running")
        runner._nodes, runner._pods = read_nodes, read_pods
        await eventually(lambda: _status(cluster, running=1, awaitingDecision=0), what="still running")
        assert fence(redis_url, "example", execution) is None, "a running seat is never fenced"
        assert [p["metadata"]["name"] for p in await cluster.pods("example")] == [name]
    assert cluster.count("delete", "pods") == 0
