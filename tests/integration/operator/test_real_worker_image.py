"""The project's own worker image on the real node (issue 24): built here, killed by the kernel, replaced.

``scripts/images.sh`` builds ``deploy/Dockerfile.worker`` with buildah FROM a Debian base made by
mmdebstrap (no registry is reachable), with the pinned Claude Code and Codex from npm; the tarball is
imported into the real node's containerd. The operator (the chart's RBAC only) launches the Swarm's
seat in that image on the real kubelet, under the security context it asks for.

1. The first attempt's memory limit is far below what the worker and the real Claude Code need: the
   kernel's memory cgroup kills it, the kubelet reports ``OOMKilled``, and the operator fences it
   ``oom_killed`` and releases it once.
2. The Swarm's owner raises the limit and chooses fresh. The one replacement is the real worker
   entrypoint in a real container: it boots (``restore_verified``, fresh), then starts the real
   Claude Code, which sends its first request to a model API this test serves on the node address
   (the only place outside the Pod network a Pod may reach). The request is held open, so the
   container is alive while its process is read from ``/proc``: uid 1000, no capabilities, no new
   privileges, seccomp, a read-only root.

The second case is native resume inside containers, with nobody deciding: the real Claude Code holds
a conversation in the first container, the worker captures it through the controller, an endless
reply makes the kernel kill that container, and the replacement resumes the same session natively
(its first request carries the earlier turns). The same case runs the real Codex: it holds its conversation
in the first container and is captured the same way, but it gives up on the endless reply and exits
1 instead of growing to the limit; that is the agent's own failure (``application_exit``), so the
master's ``resume`` brings the replacement, which restores Codex's session natively and its first
request carries the earlier turns. The seat's project is cloned from a ``git daemon`` on
the node address; found this way: ``seats[].repository`` never reached the worker on a real Pod
(no ``AGENTIHOOKS_PROJECT_REMOTES``), so a worker without a checked-out repository captured nothing.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from agentihooks_checkpoint.directive import Continuity
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores.local import LocalStore
from agentihooks_demo.procs import wait_listening
from agentihooks_demo.realresume import DUMMY_ANTHROPIC_KEY, DUMMY_OPENAI_KEY
from testsupport import procscan
from testsupport.checkpoints import make_repo
from testsupport.images import project_images
from testsupport.kube import eventually, operator_process, running_operator
from testsupport.model_api import HOLD, Flood, ModelApi, Reply, ToolCall, overlaps
from testsupport.nodediag import diagnose
from testsupport.realcluster import RealCluster as Cluster
from testsupport.realnode import NODE_IP, POD_TEMPLATE, proc_status
from testsupport.recovery import keys_of
from testsupport.redis_server import free_port

from .conftest import swarm_spec
from .flows import choose, eid, fence, fenced, gen, launch_record, pod_deleted, replacement

MERGE = {"Content-Type": "application/merge-patch+json"}
#: How long a wait on a real container may take before the test calls it stuck and prints
#: ``nodediag.diagnose``: a guard against a hang, never a bound on speed. The endless reply takes ~12 s
#: to fill 700 MiB beside a fault campaign here; the fence wait's usual 20 s was too short for it on a
#: loaded CI machine.
HANG = 300.0
#: The seat's prompt (the harness command's last argument): found again in the resumed request.
FIRST_TURN = "list what this seat was asked to do"

#: Longer than the waits above, so a stuck container fails with ``nodediag.diagnose``'s report.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def worker_ref(real_node: Any) -> str:
    ref, tarball = project_images()["worker"]
    real_node.import_image(tarball)
    return ref


@pytest.fixture(scope="module")
def git_url(real_node: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A project repository the Pods can clone: ``git daemon`` on the node address, serving a bare
    clone of a fixture project (a Pod reaches nothing beyond this machine)."""
    top = tmp_path_factory.mktemp("git")
    make_repo(top / "work", dirty=False)
    subprocess.run(["git", "clone", "-q", "--bare", str(top / "work"), str(top / "app.git")], check=True)
    port = free_port()
    daemon = subprocess.Popen(
        [
            "git",
            "daemon",
            "--reuseaddr",
            "--export-all",
            f"--base-path={top}",
            f"--listen={NODE_IP}",
            f"--port={port}",
            str(top),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_listening(NODE_IP, port, daemon, "git daemon")  # before a worker clones: a refused clone ends it
    try:
        yield f"git://{NODE_IP}:{port}/app.git"
    finally:
        daemon.terminate()
        daemon.wait(10)


@pytest.fixture(scope="module")
def model_api(real_node: Any) -> Iterator[ModelApi]:
    with ModelApi([HOLD], host=NODE_IP) as api:  # on the node address: Pods reach it, nothing else does
        yield api


def _template(memory: str, capture_every: str | None = None) -> dict[str, Any]:
    env = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    if capture_every is not None:
        env["AGENTIHOOKS_CAPTURE_INTERVAL_SECONDS"] = capture_every
    return {
        "spec": {
            **POD_TEMPLATE,
            "terminationGracePeriodSeconds": 3,
            "container": {
                "imagePullPolicy": "Never",
                "env": [{"name": k, "value": v} for k, v in env.items()],
                "resources": {"requests": {"cpu": "10m", "memory": memory}, "limits": {"memory": memory}},
            },
        }
    }


def _terminated(pod: dict[str, Any] | None) -> dict[str, Any]:
    statuses = ((pod or {}).get("status") or {}).get("containerStatuses") or []
    return dict((statuses[0].get("state") or {}).get("terminated") or {}) if statuses else {}


def _worker_process() -> Path | None:
    """The /proc folder of the replacement's ``agentihooks-worker boot`` (the first attempt's is gone):
    one in a container of the real node (its cgroup under ``kubepods``), never a worker another test
    left running on this machine as a plain process."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            worker = any(a.endswith(b"agentihooks-worker") for a in argv) and b"boot" in argv
            worker = worker and not argv[0].endswith(b"tini")  # the init that started it has its argv too
            in_pod = b"kubepods" in (proc / "cgroup").read_bytes()
            if worker and in_pod and b"AGENTIHOOKS_LAUNCH_RECORD=" in (proc / "environ").read_bytes():
                return proc
        except OSError:
            continue
    return None


def _worker_of(real_node: Any, pod: dict[str, Any]) -> Path | None:
    """The /proc folder of ``pod``'s own worker: the child of its container's init (tini) that runs
    ``agentihooks-worker`` (an earlier test's container may still be stopping beside it)."""
    init = real_node.process_of(pod)
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if proc_status(proc, "PPid") != init.name:
                continue
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(a.endswith(b"agentihooks-worker") for a in argv):
            return proc
    return None


def _container_log(root: Path, pod_name: str) -> str:
    return "".join(p.read_text(errors="replace") for p in root.glob(f"pod-logs/*_{pod_name}_*/*/*.log"))


def _verified(log: str) -> list[dict[str, Any]]:
    """The worker's ``restore_verified`` lines in a container log (CRI format: time, stream, tag, line)."""
    return [json.loads(ln.split(" ", 3)[-1]) for ln in log.splitlines() if "restore_verified" in ln]


async def _account(cluster: Cluster, name: str, api: ModelApi, harness: str = "claude") -> None:
    """The provider account, as a user gives it: a Secret the Swarm names (the operator copies it
    into each attempt's own credential Secret, which the real kubelet mounts). Codex's provider is
    its ``config.toml`` file (mounted, then copied into ``$CODEX_HOME`` by the worker)."""
    data = (
        {"ANTHROPIC_API_KEY": DUMMY_ANTHROPIC_KEY, "ANTHROPIC_BASE_URL": api.base_url}
        if harness == "claude"
        else {"OPENAI_API_KEY": DUMMY_OPENAI_KEY, "config.toml": api.codex_config()}
    )
    lent = {"swarm.agentihooks.io/pod-template": "allowed"}  # its owner lends it to the namespace's Swarms
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "labels": lent},
        "stringData": data,
    }
    r = await cluster.http.post(f"/api/v1/namespaces/{cluster.namespace}/secrets", json=secret)
    assert r.status_code == 201, r.text


async def _found(value: Any) -> Any:
    return value


async def test_the_worker_image_oom_killed_by_the_kernel_and_its_replacement_runs_the_real_claude(
    cluster: Cluster, real_node: Any, worker_ref: str, model_api: ModelApi, redis_url: str
) -> None:
    await _account(cluster, "model-account", model_api)
    spec = swarm_spec()
    spec["harness"]["command"] = ["claude", "-p", FIRST_TURN]
    spec["image"] = worker_ref
    spec["harness"]["credentials"] = {"secretName": "model-account"}
    spec["seats"][0]["project"] = "unknown"  # nothing to clone: no Pod reaches beyond this machine
    spec["podTemplate"] = _template("40Mi")
    await asyncio.to_thread(real_node.warm, worker_ref)  # killed at its limit, not left thrashing
    async with running_operator(cluster, redis_url):
        await cluster.create_swarm("image", spec)

        async def first_pod() -> dict[str, Any] | None:
            return next((p for p in await cluster.pods("image") if gen(p) == 1), None)

        first = await eventually(first_pod, timeout=90, what="the first attempt's Pod")
        lost = eid(first)
        path = f"/api/v1/namespaces/{cluster.namespace}/pods/{first['metadata']['name']}"
        try:
            ended = await eventually(
                lambda: _ended(cluster, path), timeout=HANG, what="the first attempt's container ended"
            )
        except AssertionError as e:
            raise AssertionError(diagnose(real_node, await cluster.get(path))) from e
        log = await asyncio.to_thread(_container_log, real_node.root, first["metadata"]["name"])
        assert ended.get("reason") == "OOMKilled", (ended, log[-3000:])  # the kernel, not the test
        record = await fenced(redis_url, "image", lost)
        assert record.reason == "oom_killed", record
        await eventually(
            lambda: (f := fence(redis_url, "image", lost)) is not None and f.released == ["grant", "account"],
            what="both releases recorded once",
        )
        await eventually(lambda: pod_deleted(cluster, lost), what="the fenced Pod deleted")

        r = await cluster.http.patch(
            f"/apis/agentihooks.io/v1alpha1/namespaces/{cluster.namespace}/swarms/image",
            json={"spec": {"podTemplate": _template("1Gi")}},
            headers=MERGE,
        )
        assert r.status_code == 200, r.text
        assert choose(redis_url, "image", lost, "fresh")
        second = await replacement(cluster, "image", 2)
        assert second["spec"]["containers"][0]["image"] == worker_ref

        def turn() -> Any:
            return next((q for q in model_api.snapshot() if q.path == "/v1/messages" and q.held), None)

        request = await eventually(lambda: _found(turn()), timeout=180, what="the real Claude Code's request")
        assert FIRST_TURN in request.text  # the seat's own prompt
        proc = await eventually(lambda: _found(_worker_process()), timeout=30, what="the worker's process")
        assert proc_status(proc, "Uid").split()[0] == "1000"
        assert proc_status(proc, "CapEff") == "0000000000000000"
        assert proc_status(proc, "NoNewPrivs") == "1"
        assert proc_status(proc, "Seccomp") == "2"
        root = next(ln for ln in (proc / "mountinfo").read_text().splitlines() if ln.split()[4] == "/")
        assert "ro" in root.split()[5].split(","), root

        log = await asyncio.to_thread(_container_log, real_node.root, second["metadata"]["name"])
        verified = _verified(log)
        assert verified and verified[0]["recovery"] == "fresh", log[-2000:]
        assert verified[0]["execution_id"] == eid(second)

    assert cluster.created("pods", f"swarm-{eid(second)}") == 1
    assert cluster.count("create", "pods") == 2


async def _ended(cluster: Cluster, path: str) -> dict[str, Any] | None:
    return _terminated(await cluster.get(path)) or None


#: Each harness's command and a read-only tool it runs without asking.
HARNESSES = {
    "claude": (["claude", "-p", FIRST_TURN], ToolCall("Read", {"file_path": "/etc/hostname"})),
    "codex": (["codex", "exec", FIRST_TURN], ToolCall("get_goal", {})),
}


@pytest.mark.parametrize("harness", sorted(HARNESSES))
async def test_a_seat_resumes_natively_in_the_real_worker_image_after_the_kernel_kills_it(
    harness: str,
    cluster: Cluster,
    real_node: Any,
    worker_ref: str,
    git_url: str,
    redis_url: str,
    tmp_path: Path,
) -> None:
    """Native resume inside containers, end to end on the real node, with no decision from anyone.

    1. The first attempt's real Claude Code holds a short conversation (a reply and a read-only tool
       call) with a model API on the node address, and writes its own session; the worker captures
       it through the controller (``checkpointStore.remote``) and reports the session it holds.
    2. The next reply never ends (``Flood``): the CLI keeps what it receives until its container's
       memory limit, and the kernel's memory cgroup kills it (``OOMKilled``).
    3. The operator fences ``oom_killed`` with the session, finds the verified native checkpoint and
       launches the one replacement with a native directive: the real worker verifies and restores the
       checkpoint in its container, and starts ``claude --resume``; that CLI's first request carries
       the earlier turns.
    """
    root = tmp_path / "checkpoints"
    port = free_port()
    env = {  # the operator in its own process, as the chart runs it, with its control API
        "AGENTIHOOKS_CONTROL_PORT": str(port),  # on every address: Pods reach it at NODE_IP
        "AGENTIHOOKS_CONTROL_URL": f"http://{NODE_IP}:{port}",  # what the launch records name
        "AGENTIHOOKS_CHECKPOINT_ROOT": str(root),  # the controller's own store
    }
    release = threading.Event()
    command, tool = HARNESSES[harness]
    script = [Reply("ack 1", tool), Flood(release), HOLD]
    with ModelApi(script, host=NODE_IP) as api:
        await _account(cluster, "native-account", api, harness)
        spec = swarm_spec()
        spec["image"] = worker_ref
        spec["harness"]["credentials"] = {"secretName": "native-account"}
        spec["harness"]["name"] = harness
        spec["harness"]["command"] = command
        spec["seats"][0]["project"] = "local:app"
        spec["seats"][0]["repository"] = git_url  # the worker clones it: captures need a repository
        spec["checkpointStore"] = {"remote": True}
        spec["podTemplate"] = _template("700Mi", capture_every="0.5")
        store = LocalStore(root)
        await asyncio.to_thread(real_node.warm, worker_ref)  # killed at its limit, not left thrashing
        async with operator_process(cluster, redis_url, tmp_path, operator_id="op-native", extra_env=env):
            await cluster.create_swarm("native", spec)

            async def first_pod() -> dict[str, Any] | None:
                return next((p for p in await cluster.pods("native") if gen(p) == 1), None)

            first = await eventually(first_pod, timeout=90, what="the first attempt's Pod")
            lost = eid(first)
            scope = StoreScope(swarm="native", task_id="t-1", task_generation=1, namespace=cluster.namespace)

            def native_checkpoint() -> Any:
                if not any(q.held for q in api.snapshot()):
                    return None  # the CLI has not sent its second turn yet
                found = [
                    c
                    for c in store.list_checkpoints(scope, execution_id=lost)
                    if c.native and c.complete and c.native_session_id
                ]
                return found[-1] if found else None

            checkpoint = await eventually(
                lambda: _found(native_checkpoint()), timeout=240, what="a native checkpoint of attempt 1"
            )
            release.set()  # the endless reply: the kernel kills the container
            path = f"/api/v1/namespaces/{cluster.namespace}/pods/{first['metadata']['name']}"
            try:
                record = await fenced(redis_url, "native", lost, timeout=HANG)
            except AssertionError as e:
                raise AssertionError(diagnose(real_node, await cluster.get(path))) from e
            first_log = await asyncio.to_thread(_container_log, real_node.root, first["metadata"]["name"])
            # Claude Code keeps the endless reply until the kernel kills it; Codex gives up on it and
            # exits 1, which is the agent's own failure: resumed natively once the master says so.
            expected = "oom_killed" if harness == "claude" else "application_exit"
            assert record.reason == expected, (
                record,
                _terminated(await cluster.get(path)),
                first_log[-4000:],
            )
            assert record.native_session == checkpoint.native_session_id
            if expected == "application_exit":
                assert choose(redis_url, "native", lost, "resume")

            second = await replacement(cluster, "native", 2)  # for Claude Code nobody chose: the operator did
            launch = await launch_record(cluster, eid(second))
            assert launch.restore is not None and launch.restore.recovery is Continuity.NATIVE

            def resumed() -> Any:
                held = [q for q in api.snapshot() if q.held]  # /v1/messages or /v1/responses
                return held[-1] if len(held) >= 1 and "ack 1" in held[-1].text else None

            request = await eventually(lambda: _found(resumed()), timeout=180, what="the resumed request")
            assert FIRST_TURN in request.text  # the seat's first prompt came back with the session
            log = await asyncio.to_thread(_container_log, real_node.root, second["metadata"]["name"])
            verified = [
                json.loads(ln.split(" ", 3)[-1]) for ln in log.splitlines() if "restore_verified" in ln
            ]
            assert verified and verified[0]["recovery"] == "native", log[-2000:]
            assert verified[0]["checkpoint_id"] == launch.restore.checkpoint_id
            # one live agent: every request names its attempt, and none of the first attempt's came
            # after the replacement's first
            requests = [q for q in api.snapshot() if q.role == "conversation"]
            assert {q.attempt for q in requests} == {lost, eid(second)}, [q.attempt for q in requests]
            assert overlaps(requests, {lost: eid(second)}) == []

    assert cluster.created("pods", f"swarm-{eid(second)}") == 1
    assert cluster.count("create", "pods") == 2


async def test_no_process_the_agent_can_read_holds_the_workers_credential(
    cluster: Cluster, real_node: Any, worker_ref: str, git_url: str, redis_url: str, tmp_path: Path
) -> None:
    """Issue 48, item 1, in the real worker image on the real node, as the agent would look.

    The real Claude Code holds a request open while the worker captures every 0.5 s (each capture runs
    ``git``). Root reads the worker's memory and finds its live credential there (the one whose sha256
    the controller stores): the search is not blind. Then, as the harness's user inside the container,
    every ``/proc/*/environ``, ``cmdline`` and readable ``mem`` is searched for it, round after round,
    until a round has seen a ``git`` of a capture running: it is found nowhere. The credential the Pod
    was started with is still in ``tini``'s environment (pid 1), and that scan finds it there; it was
    traded at boot, and the control API refuses it (401).
    """
    port = free_port()
    env = {
        "AGENTIHOOKS_CONTROL_PORT": str(port),
        "AGENTIHOOKS_CONTROL_URL": f"http://{NODE_IP}:{port}",
        "AGENTIHOOKS_CHECKPOINT_ROOT": str(tmp_path / "checkpoints"),
    }
    command, tool = HARNESSES["claude"]
    with ModelApi([Reply("ack 1", tool), HOLD], host=NODE_IP) as api:
        await _account(cluster, "scan-account", api)
        spec = swarm_spec()
        spec["image"] = worker_ref
        spec["harness"]["credentials"] = {"secretName": "scan-account"}
        spec["harness"]["command"] = command
        spec["seats"][0]["project"] = "local:app"
        spec["seats"][0]["repository"] = git_url
        spec["checkpointStore"] = {"remote": True}
        spec["podTemplate"] = _template("700Mi", capture_every="0.5")
        await asyncio.to_thread(real_node.warm, worker_ref)
        async with operator_process(cluster, redis_url, tmp_path, operator_id="op-scan", extra_env=env):
            await cluster.create_swarm("scan", spec)
            await eventually(
                lambda: _found(next((q for q in api.snapshot() if q.held), None)),
                timeout=240,
                what="the real Claude Code's held request",
            )
            [pod] = await cluster.pods("scan")
            ex = eid(pod)
            secret = await cluster.get(
                f"/api/v1/namespaces/{cluster.namespace}/secrets/swarm-{ex}-credential"
            )
            assert secret is not None
            started_with = base64.b64decode(secret["data"]["token"])
            client = redis.Redis.from_url(redis_url)
            try:
                digest = client.hget(keys_of(client, "scan").worker_credentials, ex)
            finally:
                client.close()
            assert digest is not None and digest.decode() != hashlib.sha256(started_with).hexdigest()
            [pod] = [
                p for p in await cluster.pods("scan") if p["metadata"]["name"] == pod["metadata"]["name"]
            ]
            worker = await eventually(
                lambda: _found(_worker_of(real_node, pod)), timeout=30, what="this Pod's worker"
            )
            live = await asyncio.to_thread(procscan.tokens_in_memory, int(worker.name), {digest.decode()})
            assert len(live) == 1, "the worker's own memory must hold its live credential"
            [token] = live
            cid = pod["status"]["containerStatuses"][0]["containerID"].removeprefix("containerd://")
            python = str((worker / "exe").readlink())
            rounds: list[dict[str, Any]] = []

            def scan() -> bool:
                res = real_node.ctr(
                    "tasks", "exec", "--exec-id", f"scan-{len(rounds)}", "--user", "1000", cid,
                    python, "-c", procscan.SCANNER, "5", token.encode().hex(), started_with.hex(),
                )  # fmt: skip
                assert res.returncode == 0, res.stderr
                rounds.append(json.loads(res.stdout.strip().splitlines()[-1]))
                return len(rounds) >= 2 and any(r["git"] for r in rounds)

            await eventually(
                lambda: asyncio.to_thread(scan), timeout=120, what="a scan beside a capture's git"
            )
            async with httpx.AsyncClient(base_url=f"http://{NODE_IP}:{port}", timeout=10) as http:
                r = await http.post(
                    f"/v1/executions/{ex}/lease",
                    json={},
                    headers={"Authorization": f"Bearer {started_with.decode()}"},
                )
                assert r.status_code == 401, r.text  # traded at boot: it matches nothing
    assert all(r["uid"] == 1000 for r in rounds)
    assert [f for r in rounds for f in r["found"] if f["needle"] == 0] == [], rounds  # the live one: nowhere
    inherited = {(f["pid"], f["file"]) for r in rounds for f in r["found"] if f["needle"] == 1}
    assert ("1", "environ") in inherited, rounds  # the scan does see what it can read: tini's copy
    assert all(r["read"]["environ"] and r["read"]["cmdline"] and r["denied"]["environ"] for r in rounds)
