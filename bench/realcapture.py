"""Benchmark what a whole-container death costs on the real node, with the real Claude Code and Codex.

Issue 45's figures on real parts: the project's worker image (real CLIs from npm) on the real node
(containerd, runc, a real kubelet), the operator in its own process with its control API, checkpoints
through the controller (``checkpointStore.remote``), and a loopback model API that answers each turn
after a model's think time (``--think`` seconds, drawn per turn) with a text carrying its turn number
and a read-only tool call, so the CLI goes on turn after turn.

Per run, at a random moment of the conversation, every process of the worker container is SIGKILLed
at once (``ctr tasks kill --all``: what a crashed node or a forced kill leaves, no final capture).
The kubelet reports the exit, the operator fences ``application_exit``, the benchmark resumes at once
as a master would, and the replacement restores the newest checkpoint natively. Per run:

* **turns lost** = the newest turn the dead agent had received in full - the newest turn the
  replacement's first request carries (what its restored session holds);
* **time to the resumed turn**, split: kill → fence recorded → replacement Pod created → its worker
  verified the checkpoint (``restore_verified``, the container log's own timestamp) → the replacement
  CLI's first request.

Continuous capture (the default) and the earlier default, periodic every 300 s, run interleaved for
each harness, so the machine's noise hits them alike. Not a test: it asserts nothing. Root only (the
real node). Run: ``sudo .venv/bin/python bench/realcapture.py --kills 5``. Figures: docs/performance.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench" / "support"), str(ROOT / "tests")]

import realplane  # noqa: E402
import redis  # noqa: E402
from agentihooks_demo.procs import wait_listening  # noqa: E402
from agentihooks_demo.realresume import DUMMY_ANTHROPIC_KEY, DUMMY_OPENAI_KEY  # noqa: E402
from agentihooks_operator.recovery import FenceRecord  # noqa: E402
from realplane import note, pct  # noqa: E402
from testsupport.checkpoints import make_repo  # noqa: E402
from testsupport.images import project_images  # noqa: E402
from testsupport.kube import operator_process  # noqa: E402
from testsupport.model_api import ModelApi, Reply, ToolCall  # noqa: E402
from testsupport.realnode import NODE_IP, POD_TEMPLATE, RealNode  # noqa: E402
from testsupport.recovery import keys_of, record_choice  # noqa: E402
from testsupport.redis_server import RedisServer, free_port  # noqa: E402

HARNESSES = {
    "claude": (["claude", "-p", "work through the task"], ToolCall("Read", {"file_path": "/etc/hostname"})),
    "codex": (["codex", "exec", "work through the task"], ToolCall("get_goal", {})),
}
MODES = {"continuous": {"mode": "continuous"}, "periodic": {"mode": "periodic", "intervalSeconds": 300}}
MARK = re.compile(r"\[turn (\d+)\]")
SWARM_LABEL = "swarm.agentihooks.io/swarm"
EXE_LABEL = "swarm.agentihooks.io/execution-id"


def fence_of(redis_url: str, swarm: str, execution_id: str) -> FenceRecord | None:
    client = redis.Redis.from_url(redis_url)
    try:
        raw = client.hget(keys_of(client, swarm).attempt_fences, execution_id)
    finally:
        client.close()
    return FenceRecord.model_validate_json(raw) if raw else None


async def until(check: Any, bound: float, what: str) -> Any:
    """``check()`` (sync or async) until truthy; the time it first was, and its value."""
    deadline = time.time() + bound
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return time.time(), value
        if time.time() > deadline:
            raise TimeoutError(f"not within {bound:.0f} s: {what}")
        await asyncio.sleep(0.05)


def script(think: tuple[float, float], harness: str, rng: random.Random) -> list[Reply]:
    tool = HARNESSES[harness][1]
    return [Reply(f"[turn {k}] done with step {k}", tool, delay=rng.uniform(*think)) for k in range(1, 400)]


def log_time(root: Path, pod: str, marker: str) -> float | None:
    """The CRI timestamp of the first line of ``pod``'s container log containing ``marker``."""
    for path in root.glob(f"pod-logs/*_{pod}_*/*/*.log"):
        for line in path.read_text(errors="replace").splitlines():
            if marker in line:
                stamp = line.split(" ", 1)[0]
                return datetime.fromisoformat(stamp[:26].rstrip("Z") + "+00:00").timestamp()
    return None


async def one_run(
    ctx: dict[str, Any], harness: str, mode: str, index: int, rng: random.Random
) -> dict[str, Any]:
    cluster, node, api, redis_url = ctx["cluster"], ctx["node"], ctx["api"], ctx["redis_url"]
    swarm = f"{harness[:2]}-{mode[:4]}-{index}"
    api.set_script(script(ctx["think"], harness, rng))
    spec = {
        "image": ctx["worker_ref"],
        "harness": {
            "name": harness,
            "command": HARNESSES[harness][0],
            "credentials": {"secretName": f"acct-{harness}"},
        },
        "seats": [
            {
                "name": "s1",
                "project": "local:app",
                "repository": ctx["git_url"],
                "task": {"id": "t-1", "text": "x"},
            }
        ],
        "recovery": {"automation": True, "passIntervalSeconds": 0.5},
        "checkpointStore": {"remote": True},
        "capture": MODES[mode],
        "podTemplate": {
            "spec": {
                **POD_TEMPLATE,
                "terminationGracePeriodSeconds": 3,
                "container": {
                    "imagePullPolicy": "Never",
                    "env": [{"name": "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "value": "1"}],
                    "resources": {"requests": {"cpu": "10m", "memory": "1Gi"}, "limits": {"memory": "1Gi"}},
                },
            }
        },
    }
    since = len(api.snapshot())
    await cluster.create_swarm(swarm, spec)
    _, first = await until(lambda: _pod(cluster, swarm, 1), 180, "the first attempt's Pod running")
    lost_eid = first["metadata"]["labels"][EXE_LABEL]
    kept: dict[str, str] = {}

    async def first_request() -> Any:
        """The first CLI's first request; the worker's log, kept while it runs, if it ends before."""
        for path in node.root.glob(f"pod-logs/*_{first['metadata']['name']}_*/*/*.log"):
            kept[str(path)] = path.read_text(errors="replace")
        if fence_of(redis_url, swarm, lost_eid) is not None:
            raise RuntimeError(
                f"the first attempt ended before its first request: {list(kept.values())[-1:]}"
            )
        return _first_request(api, since, lost_eid)

    await until(first_request, 240, "the first CLI's first request")
    await asyncio.sleep(rng.uniform(*ctx["kill_after"]))
    cid = first["status"]["containerStatuses"][0]["containerID"].removeprefix("containerd://")
    killed = time.time()
    killed_mono = time.monotonic()
    res = await asyncio.to_thread(node.ctr, "tasks", "kill", "--all", "--signal", "SIGKILL", cid)
    if res.returncode != 0:
        raise RuntimeError(f"ctr kill failed: {res.stderr.strip()}")
    had = max(
        (
            _mark(q.reply.text)
            for q in api.snapshot()[since:]
            if q.attempt == lost_eid
            and q.reply is not None
            and q.answered is not None
            and q.answered <= killed_mono
        ),
        default=0,
    )
    _, fence = await until(lambda: fence_of(redis_url, swarm, lost_eid), 120, "the fence")
    if fence.reason != "oom_killed":  # a SIGKILL of every process is the agent's exit: a master decides,
        # at once: resume from the newest checkpoint, or fresh when the attempt committed none
        choice = "fresh" if fence.archive_watermark is None else "resume"
        await asyncio.to_thread(record_choice, redis_url, swarm, lost_eid, choice, "bench")
    created, second = await until(lambda: _pod(cluster, swarm, 2, running=False), 120, "the replacement Pod")
    new_eid = second["metadata"]["labels"][EXE_LABEL]
    _, request = await until(lambda: _first_request(api, since, new_eid), 240, "the resumed request")
    carried = max((_mark(t) for t in MARK.findall(request.text)), default=0)
    verified = log_time(node.root, second["metadata"]["name"], "restore_verified")
    await cluster.http.delete(f"/apis/agentihooks.io/v1alpha1/namespaces/{cluster.namespace}/swarms/{swarm}")
    await until(lambda: _no_pods(cluster, swarm), 120, "the Swarm's Pods gone")
    return {
        "harness": harness,
        "mode": mode,
        "had": had,
        "carried": carried,
        "lost": had - carried,
        "fence_reason": fence.reason,
        "fence_watermark": fence.archive_watermark,
        "to_fence": fence.fenced_at_ms / 1000 - killed,
        "to_pod": created - killed,
        "to_verified": (verified - killed) if verified else None,
        "to_turn": request.wall - killed,
    }


def _mark(text: str) -> int:
    found = MARK.findall(text) if not text.isdigit() else [text]
    return max((int(n) for n in found), default=0)


async def _pod(cluster: Any, swarm: str, generation: int, running: bool = True) -> dict[str, Any] | None:
    for pod in await cluster.pods(swarm):
        if pod["metadata"]["labels"].get("swarm.agentihooks.io/generation") != str(generation):
            continue
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        if not running or (statuses and "running" in (statuses[0].get("state") or {})):
            return dict(pod)
    return None


async def _no_pods(cluster: Any, swarm: str) -> bool:
    return not await cluster.pods(swarm)


def _first_request(api: ModelApi, since: int, attempt: str) -> Any:
    return next(
        (q for q in api.snapshot()[since:] if q.attempt == attempt and q.role == "conversation"), None
    )


def git_daemon(work: Path) -> tuple[subprocess.Popen[bytes], str]:
    top = work / "git"
    make_repo(top / "work", dirty=False)
    subprocess.run(["git", "clone", "-q", "--bare", str(top / "work"), str(top / "app.git")], check=True)
    port = free_port()
    argv = [
        "git",
        "daemon",
        "--reuseaddr",
        "--export-all",
        f"--base-path={top}",
        f"--listen={NODE_IP}",
        f"--port={port}",
        str(top),
    ]
    daemon = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_listening(NODE_IP, port, daemon, "git daemon")  # before the first worker clones
    return daemon, f"git://{NODE_IP}:{port}/app.git"


async def accounts(cluster: Any, api: ModelApi) -> None:
    lent = {"swarm.agentihooks.io/pod-template": "allowed"}
    for harness, data in (
        ("claude", {"ANTHROPIC_API_KEY": DUMMY_ANTHROPIC_KEY, "ANTHROPIC_BASE_URL": api.base_url}),
        ("codex", {"OPENAI_API_KEY": DUMMY_OPENAI_KEY, "config.toml": api.codex_config()}),
    ):
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": f"acct-{harness}", "labels": lent},
            "stringData": data,
        }
        r = await cluster.http.post(f"/api/v1/namespaces/{cluster.namespace}/secrets", json=body)
        r.raise_for_status()


async def measure(args: argparse.Namespace, work: Path) -> None:
    bindir = realplane.require_tools()
    rng = random.Random(args.seed)
    redis_server = RedisServer(work / "redis")
    redis_server.start()
    daemon: subprocess.Popen[bytes] | None = None
    results: list[dict[str, Any]] = []
    try:
        async with realplane.real_cluster(bindir, work) as cluster:
            node = RealNode(cluster.plane)
            await asyncio.to_thread(node.up)
            try:
                daemon, git_url = git_daemon(work)  # on the node address, which exists once the node is up
                ref, tarball = project_images()["worker"]
                await asyncio.to_thread(node.import_image, tarball)
                port = free_port()
                env = {
                    "AGENTIHOOKS_CONTROL_PORT": str(port),
                    "AGENTIHOOKS_CONTROL_URL": f"http://{NODE_IP}:{port}",
                    "AGENTIHOOKS_CHECKPOINT_ROOT": str(work / "checkpoints"),
                }
                with ModelApi([], host=NODE_IP) as api:
                    await accounts(cluster, api)
                    async with operator_process(
                        cluster, redis_server.url, work, operator_id="op-bench", extra_env=env
                    ):
                        ctx = {
                            "cluster": cluster,
                            "node": node,
                            "api": api,
                            "redis_url": redis_server.url,
                            "worker_ref": ref,
                            "git_url": git_url,
                            "think": (args.think_min, args.think_max),
                            "kill_after": (args.kill_min, args.kill_max),
                        }
                        for i in range(args.kills):
                            for harness in args.harness:
                                for mode in MODES:  # interleaved
                                    row = await one_run(ctx, harness, mode, i, rng)
                                    results.append(row)
                                    note(json.dumps(row))
            finally:
                await asyncio.to_thread(node.down)
    finally:
        if daemon is not None:
            daemon.terminate()
        redis_server.stop()
    report(results)


def report(rows: list[dict[str, Any]]) -> None:
    print("| harness | capture | kills | turns lost: median | p95 | max | turns had at the kill (median) |")
    print("|---|---|---|---|---|---|---|")
    for harness in sorted({r["harness"] for r in rows}):
        for mode in MODES:
            sel = [r for r in rows if r["harness"] == harness and r["mode"] == mode]
            if not sel:
                continue
            lost = [float(r["lost"]) for r in sel]
            had = statistics.median(r["had"] for r in sel)
            print(
                f"| {harness} | {mode} | {len(sel)} | {pct(lost, 0.5):g} | {pct(lost, 0.95):g} | "
                f"{max(lost):g} | {had:g} |"
            )
    print()
    print(
        "| harness | kill -> fence | -> replacement Pod | -> checkpoint verified | -> first resumed request |"
    )
    print("|---|---|---|---|---|")
    for harness in sorted({r["harness"] for r in rows}):
        sel = [r for r in rows if r["harness"] == harness]
        cells = []
        for key in ("to_fence", "to_pod", "to_verified", "to_turn"):
            values = [float(r[key]) for r in sel if r[key] is not None]
            cells.append(f"p50 {pct(values, 0.5):.2f} s, p99 {pct(values, 0.99):.2f} s" if values else "-")
        print(f"| {harness} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=5, help="kills per harness and capture mode")
    parser.add_argument("--harness", nargs="+", default=sorted(HARNESSES), choices=sorted(HARNESSES))
    parser.add_argument("--think-min", type=float, default=2.0, help="shortest think time of a turn (s)")
    parser.add_argument("--think-max", type=float, default=5.0, help="longest think time of a turn (s)")
    parser.add_argument(
        "--kill-min", type=float, default=10.0, help="earliest kill after the first request (s)"
    )
    parser.add_argument(
        "--kill-max", type=float, default=40.0, help="latest kill after the first request (s)"
    )
    parser.add_argument("--seed", type=int, default=45)
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs)")
    realplane.run_on_real_node(measure, parser.parse_args(), "bench-realcapture-")


if __name__ == "__main__":
    main()
