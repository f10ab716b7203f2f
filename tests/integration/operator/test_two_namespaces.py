"""Two same-named Swarms in two namespaces under one operator (issue 22), on the real control plane.

One release watches two namespaces (the chart's RBAC rendered for both, nothing else), each holding a
Swarm ``twin`` with the same spec. Under one replica and under two, each namespace's Swarm admits,
fails, fences, releases and replaces only its own seat: its own Redis state (the namespaced keys),
its own Pods, never the other's. Through the control API and the CLI, a route that names ``twin``
alone is refused naming both namespaces and changes nothing; the namespaced routes reach only the
Swarm named; a master credential of one namespace's Swarm is refused on the other's.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from agentihooks_operator.cli.main import app
from agentihooks_operator.recovery import FenceRecord
from agentihooks_operator.recovery.store.keys import SwarmKeys
from agentihooks_operator.recovery.store.layout import unmigrated
from testsupport import kubelet as kl
from testsupport.kube import eventually, operator_process
from testsupport.node import RealKubelet
from testsupport.realcluster import RealCluster
from typer.testing import CliRunner

from .conftest import swarm_spec

NAME = "twin"
NODE = "kind-worker"
EXE = "swarm.agentihooks.io/execution-id"
GEN = "swarm.agentihooks.io/generation"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def two(control_plane: Any, session_helm: Any, tmp_path: Path) -> AsyncIterator[RealCluster]:
    """Two namespaces one release watches, its RBAC and nothing more; refusals fail the test."""
    c = RealCluster.create(control_plane, session_helm, tmp_path, more_namespaces=1)
    try:
        yield c
        assert not c.denied_calls(), f"the chart's RBAC refused the operator: {sorted(c.denied_calls())}"
    finally:
        await c.close()


@pytest.fixture
async def kubelets(two: RealCluster) -> AsyncIterator[dict[str, RealKubelet]]:
    made = {ns: RealKubelet(two.plane, ns) for ns in (two.namespace, *two.also)}
    yield made
    for k in made.values():
        await k.close()


def _spec() -> dict[str, Any]:
    spec = swarm_spec(1, interval=0.3)
    spec["masters"] = [{"agent": "lead", "credentialSecret": "lead-cred"}]
    return spec


async def _master_secret(two: RealCluster, namespace: str, token: str) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "lead-cred", "namespace": namespace},
        "data": {"token": base64.b64encode(token.encode()).decode()},
    }
    (await two.http.post(f"/api/v1/namespaces/{namespace}/secrets", json=body)).raise_for_status()


async def _pods(two: RealCluster, namespace: str) -> list[dict[str, Any]]:
    return await two.pods(NAME, namespace)


async def _pod_of(two: RealCluster, namespace: str, generation: int) -> dict[str, Any]:
    async def found() -> dict[str, Any] | None:
        return next(
            (p for p in await _pods(two, namespace) if int(p["metadata"]["labels"][GEN]) == generation), None
        )

    return await eventually(found, timeout=60, what=f"{namespace}: generation {generation} Pod")


def _keys(namespace: str) -> SwarmKeys:
    return SwarmKeys("agentihooks", NAME, namespace)


def _attempts(client: redis.Redis, namespace: str) -> set[str]:
    return {k.decode() for k in client.hkeys(_keys(namespace).attempt_records)}


def _fences(client: redis.Redis, namespace: str) -> dict[str, FenceRecord]:
    raw = client.hgetall(_keys(namespace).attempt_fences)
    return {k.decode(): FenceRecord.model_validate_json(v) for k, v in raw.items()}


async def _run(
    two: RealCluster, kubelets: dict[str, RealKubelet], client: redis.Redis, ns: str
) -> dict[str, Any]:
    pod = await _pod_of(two, ns, 1)
    await kubelets[ns].put_node(NODE)
    await kubelets[ns].set_status(pod["metadata"]["name"], kl.running(), node_name=NODE)
    return pod


async def _decide(urls: list[str], ns: str, who: str, choice: str = "fresh") -> httpx.Response:
    """A restore request for ``ns``'s seat, by namespace and name, at the replica that takes it."""
    path = f"/v1/namespaces/{ns}/swarms/{NAME}/seats/eng-1/restore-request"
    answer: httpx.Response | None = None
    async with httpx.AsyncClient(timeout=30) as http:
        for url in urls:  # a replica without the lease may answer 503 (or forward it)
            answer = await http.post(
                url + path, json={"choice": choice}, headers={"Authorization": f"Bearer {who}"}
            )
            if answer.status_code < 500:
                return answer
    assert answer is not None
    return answer


async def _reads(url: str, ns: str, who: str) -> bool:
    async with httpx.AsyncClient(timeout=30) as http:
        path = f"{url}/v1/namespaces/{ns}/swarms/{NAME}/status"
        return (await http.get(path, headers={"Authorization": f"Bearer {who}"})).status_code == 200


async def _fail_and_replace(
    two: RealCluster,
    kubelets: dict[str, RealKubelet],
    client: redis.Redis,
    ns: str,
    other: str,
    urls: list[str],
    masters: dict[str, str],
) -> None:
    """Fail ``ns``'s running seat: it alone is fenced, decided and replaced; ``other`` is left as it was."""
    before_other = sorted(p["metadata"]["name"] for p in await _pods(two, other))
    other_state = (_attempts(client, other), _fences(client, other))
    [lost] = [p for p in await _pods(two, ns) if p["status"].get("phase") == "Running"]
    await kubelets[ns].set_status(lost["metadata"]["name"], kl.oom_killed())
    lost_eid = lost["metadata"]["labels"][EXE]

    async def settled() -> bool:
        fence = _fences(client, ns).get(lost_eid)
        return fence is not None and set(fence.released) == {"account", "grant"}

    await eventually(settled, timeout=30, what=f"{ns}: the lost attempt fenced and its releases made")
    # The other namespace's master may not decide for this Swarm; its own master may (once the
    # replica has read the masters' Secrets of the Swarm it serves).
    await eventually(lambda: _reads(urls[0], ns, masters[ns]), timeout=60, what=f"{ns}'s master known")
    foreign = await _decide(urls, ns, masters[other])
    assert foreign.status_code == 403 and foreign.json()["error"] == "forbidden_scope", foreign.text
    decided = await _decide(urls, ns, masters[ns])
    assert decided.status_code in (200, 202), decided.text
    generation = int(lost["metadata"]["labels"][GEN]) + 1
    new = await _pod_of(two, ns, generation)
    new_eid = new["metadata"]["labels"][EXE]

    async def only_new() -> bool:
        return await _pods_named(two, ns) == {new["metadata"]["name"]}

    await eventually(only_new, timeout=30, what=f"{ns}: the fenced Pod gone")
    assert _attempts(client, ns) == {lost_eid, new_eid}
    assert list(_fences(client, ns)) == [lost_eid]
    assert lost_eid not in _attempts(client, other) and new_eid not in _attempts(client, other)
    # The other namespace's Swarm saw nothing: same Pods (none deleted, none added), same records.
    assert sorted(p["metadata"]["name"] for p in await _pods(two, other)) == before_other
    assert (_attempts(client, other), _fences(client, other)) == other_state
    await kubelets[ns].set_status(new["metadata"]["name"], kl.running(), node_name=NODE)


async def _pods_named(two: RealCluster, ns: str) -> set[str]:
    return {p["metadata"]["name"] for p in await _pods(two, ns)}


async def _both_admitted(two: RealCluster, kubelets: dict[str, RealKubelet], client: redis.Redis) -> None:
    a, b = two.namespace, two.also[0]
    pods = {ns: await _run(two, kubelets, client, ns) for ns in (a, b)}
    eids = {ns: p["metadata"]["labels"][EXE] for ns, p in pods.items()}
    assert eids[a] != eids[b], "one execution never runs in two namespaces"
    for ns in (a, b):
        assert _attempts(client, ns) == {eids[ns]}, f"{ns} records its own attempt only"
        assert [p["metadata"]["name"] for p in await _pods(two, ns)] == [pods[ns]["metadata"]["name"]]
    assert unmigrated(client, "agentihooks") == [], "nothing is written under name-only keys"


@contextlib.asynccontextmanager
async def _replicas(
    two: RealCluster, redis_url: str, tmp_path: Path, n: int, token: str
) -> AsyncIterator[list[str]]:
    """``n`` operator processes watching both namespaces, each serving the control API; their URLs."""
    urls: list[str] = []
    async with contextlib.AsyncExitStack() as stack:
        for i in range(n):
            port = _free_port()
            env = {
                "AGENTIHOOKS_NAMESPACES": ",".join((two.namespace, *two.also)),
                "AGENTIHOOKS_CONTROL_HOST": "127.0.0.1",
                "AGENTIHOOKS_CONTROL_PORT": str(port),
                "AGENTIHOOKS_OPERATOR_TOKEN": token,
                "AGENTIHOOKS_PLACEMENT_HOLD_SECONDS": "1",
                # a write reaching the replica without the swarm's lease is forwarded to its holder
                "AGENTIHOOKS_API_ADVERTISE_URL": f"http://127.0.0.1:{port}",
            }
            await stack.enter_async_context(
                operator_process(
                    two, redis_url, tmp_path, operator_id=f"op-{i}", lease_ms=2000, extra_env=env
                )
            )
            urls.append(f"http://127.0.0.1:{port}")
        for url in urls:
            await eventually(lambda u=url: _healthy(u), timeout=30, what=f"{url} serving")
        yield urls


async def _healthy(url: str) -> bool:
    try:
        async with httpx.AsyncClient(timeout=5) as http:
            return (await http.get(url + "/healthz")).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.mark.parametrize("replicas", [1, 2], ids=["one-replica", "two-replicas"])
async def test_same_named_swarms_in_two_namespaces_recover_only_their_own_seats(
    two: RealCluster, kubelets: dict[str, RealKubelet], redis_url: str, tmp_path: Path, replicas: int
) -> None:
    a, b = two.namespace, two.also[0]
    client = redis.Redis.from_url(redis_url)
    token = secrets.token_urlsafe(24)
    masters = {a: secrets.token_urlsafe(24), b: secrets.token_urlsafe(24)}
    for ns in (a, b):
        await _master_secret(two, ns, masters[ns])
    async with _replicas(two, redis_url, tmp_path, replicas, token) as urls:
        for ns in (a, b):
            await two.create_swarm(NAME, _spec(), namespace=ns)
        await _both_admitted(two, kubelets, client)
        await _fail_and_replace(two, kubelets, client, a, b, urls, masters)
        await _fail_and_replace(two, kubelets, client, b, a, urls, masters)
        await _through_the_api(urls[0], token, masters, a, b, client)
    client.close()


async def _through_the_api(
    url: str, token: str, masters: dict[str, str], a: str, b: str, client: redis.Redis
) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:

        async def call(method: str, path: str, who: str = token) -> httpx.Response:
            return await http.request(method, path, headers={"Authorization": f"Bearer {who}"})

        async def served() -> bool:
            listed = (await call("GET", "/v1/swarms")).json().get("swarms", [])
            return sorted((s["namespace"], s["swarm"]) for s in listed) == sorted([(a, NAME), (b, NAME)])

        await eventually(served, timeout=30, what="both Swarms served by this replica")
        before = {ns: (client.get(_keys(ns).recovery_paused), _attempts(client, ns)) for ns in (a, b)}
        ambiguous = await call("GET", f"/v1/swarms/{NAME}/status")
        assert ambiguous.status_code == 409 and ambiguous.json()["error"] == "ambiguous_swarm", ambiguous.text
        assert a in ambiguous.json()["message"] and b in ambiguous.json()["message"]
        paused = await call("POST", f"/v1/swarms/{NAME}/pause")
        assert paused.status_code == 409 and paused.json()["error"] == "ambiguous_swarm"
        assert {ns: (client.get(_keys(ns).recovery_paused), _attempts(client, ns)) for ns in (a, b)} == before
        for ns in (a, b):
            status = await call("GET", f"/v1/namespaces/{ns}/swarms/{NAME}/status")
            assert status.status_code == 200, status.text
            body = status.json()
            assert body["namespace"] == ns and body["swarm"] == NAME
            [seat] = body["seats"]
            assert seat["execution_id"] in _attempts(client, ns) and seat["generation"] == 2
            # A master of this namespace's Swarm reads it, and is refused on the other's.
            other = b if ns == a else a
            own = await call("GET", f"/v1/namespaces/{ns}/swarms/{NAME}/status", masters[ns])
            assert own.status_code == 200, own.text
            foreign = await call("GET", f"/v1/namespaces/{other}/swarms/{NAME}/status", masters[ns])
            assert foreign.status_code == 403 and foreign.json()["error"] == "forbidden_scope"
        paused = await call("POST", f"/v1/namespaces/{a}/swarms/{NAME}/pause")
        assert paused.status_code == 200, paused.text
        assert client.get(_keys(a).recovery_paused) is not None
        assert client.get(_keys(b).recovery_paused) is None, "the other namespace's Swarm is not paused"
        # The CLI names the namespace (-n) and reaches only that Swarm; without it, it is refused.
        env = {"AGENTIHOOKS_CONTROL_URL": url, "AGENTIHOOKS_TOKEN": token, "KUBECONFIG": os.devnull}
        shown = CliRunner().invoke(app, ["swarm", NAME, "-n", b, "status", "--json"], env=env)
        assert shown.exit_code == 0, shown.output
        assert json.loads(shown.output)["namespace"] == b and json.loads(shown.output)["paused"] is False
        unnamed = CliRunner().invoke(app, ["swarm", NAME, "status"], env={**env, "HOME": os.devnull})
        assert unnamed.exit_code != 0 and "exists in namespaces" in unnamed.output, unnamed.output
        resumed = CliRunner().invoke(app, ["-n", a, "swarm", NAME, "unpause"], env=env)
        assert resumed.exit_code == 0, resumed.output
        assert client.get(_keys(a).recovery_paused) is None
