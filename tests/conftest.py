"""Fixtures every suite may use: a real redis-server and a real S3 API (moto server + boto3)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis
from testsupport.redis_server import RedisServer


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One private redis-server for the session (AOF on). Tests that stop it must start it again."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> Iterator[str]:
    """The session server's URL, flushed before each test so tests never see each other's keys."""
    if redis_server.proc is None:
        redis_server.start()
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    yield redis_server.url


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of this test's own, for tests that kill or restart it."""
    server = RedisServer(tmp_path / "redis")
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A real three-primary Redis Cluster on loopback for the session (testsupport/redis_cluster.py);
    ``.url`` is its ``redis+cluster://`` seed, ``.flush()`` empties every primary."""
    from testsupport.redis_cluster import RedisClusterProcesses

    cluster = RedisClusterProcesses(tmp_path_factory.mktemp("redis-cluster"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A moto S3 server on loopback; use it through real boto3 with ``endpoint_url``."""
    import os

    from moto.server import ThreadedMotoServer

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3_bucket(s3_endpoint: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh, empty bucket on the moto server; its name is unique per test."""
    import re
    import uuid

    import boto3

    name = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:40].strip("-") + "-" + uuid.uuid4().hex[:8]
    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    s3.create_bucket(Bucket=name)
    yield name


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One real control plane (etcd + kube-apiserver + kube-controller-manager) for the session, with
    the chart's Swarm CRD applied. Tests isolate themselves by namespace (``real_cluster``)."""
    from testsupport.controlplane import control_plane as start
    from testsupport.node import keep_node_alive
    from testsupport.realcluster import install_crd

    with start(tmp_path_factory.mktemp("control-plane")) as plane:
        install_crd(plane)
        stop = keep_node_alive(plane, "steady-node")
        yield plane
        stop()


@pytest.fixture(scope="session")
def session_helm(tmp_path_factory: pytest.TempPathFactory) -> object:
    from testsupport.helm import make_helm

    return make_helm(tmp_path_factory.mktemp("helm"))


@pytest.fixture
async def real_cluster(control_plane: object, session_helm: object, tmp_path: Path) -> AsyncIterator[object]:
    """This test's namespace on the real control plane (Pod Security ``restricted``), the chart's RBAC
    rendered for it, and the operator's identity (``cluster.kubeconfig``) holding only that RBAC.
    Fails the test if the API server refused any of the operator's calls (a rule missing in the chart).

    A test that takes a rule away on purpose names the refusals it provokes in
    ``cluster.expected_denials`` (a set of ``(verb, group, resource)``); any other refusal still fails."""
    from testsupport.realcluster import RealCluster

    c = RealCluster.create(control_plane, session_helm, tmp_path)  # type: ignore[arg-type]
    try:
        yield c
        expected: set[tuple[str, str, str]] = set(getattr(c, "expected_denials", ()))
        denied = sorted(c.denied_calls() - expected)
        assert not denied, f"the chart's RBAC refused the operator: {denied}"
    finally:
        await c.close()


@pytest.fixture
async def real_kubelet(real_cluster: object) -> AsyncIterator[object]:
    """A simulated kubelet for the test's namespace (Nodes, Leases, bindings, Pod statuses)."""
    from testsupport.node import RealKubelet

    k = RealKubelet(real_cluster.plane, real_cluster.namespace)  # type: ignore[attr-defined]
    yield k
    await k.close()


@pytest.fixture(scope="module")
def real_node(control_plane: object) -> Iterator[object]:
    """A real node (containerd, runc, a real kubelet, kube-scheduler) on the session's control plane,
    up for one test module and torn down after it (testsupport/realnode.py). Skipped, with the reason,
    where this machine cannot host one; under ``CI=true`` that fails instead, so the tier never vanishes.
    """
    from testsupport.images import probe_image
    from testsupport.realnode import IMAGES, NodeUnavailable, RealNode, why_not

    reason = why_not()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the real-node tier cannot run here: {reason}")
        pytest.skip(f"no real node: {reason}")
    node = RealNode(control_plane)  # type: ignore[arg-type]
    try:
        node.up()
        node.import_image(probe_image(IMAGES))
    except NodeUnavailable as e:
        node.down()
        pytest.fail(f"the real node did not come up: {e}")
    try:
        yield node
    finally:
        node.down()
