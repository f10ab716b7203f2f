"""Benchmark what the worker lease costs the controller: renewals of 1,000 workers at their real rate.

Every worker renews its lease about every quarter of it (30 s at the default 120 s): two small
requests a minute. Simulated workers (this process, each with its own live worker credential) send
those renewals to the real control API, running as a process of its own on a real redis-server, for
``--window`` seconds at that rate, and the control API's CPU is read from ``/proc`` over the window.
Baselines in the same run: the same process idle for as long, and the same number of ``/watermark``
heartbeats (what a worker already sends after each capture), so the figure that matters is printed
as a ratio. Not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "bench")]

import httpx  # noqa: E402
import redis  # noqa: E402
from agentihooks_operator.recovery import Recovery  # noqa: E402
from support.redisproc import private_redis  # noqa: E402
from testsupport.recovery import MemoryLauncher, swarm_spec  # noqa: E402
from testsupport.redis_server import free_port  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


async def load(url: str, tokens: dict[str, str], route: str, window: float) -> tuple[int, int]:
    """Each worker's call once, spread evenly over ``window`` seconds; (answered 200, others)."""
    ok = bad = 0
    gap = window / len(tokens)
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with httpx.AsyncClient(base_url=url, timeout=30, limits=limits) as c:
        start = time.monotonic()

        async def one(n: int, eid: str, token: str) -> None:
            nonlocal ok, bad
            await asyncio.sleep(max(0.0, start + n * gap - time.monotonic()))
            body = {} if route == "lease" else {"watermark": n}
            r = await c.post(
                f"/v1/executions/{eid}/{route}", json=body, headers={"Authorization": f"Bearer {token}"}
            )
            if r.status_code == 200:
                ok += 1
            else:
                bad += 1
                if bad <= 3:
                    print(f"  ({route}: {r.status_code} {r.text[:120]})")

        await asyncio.gather(*(one(n, eid, tok) for n, (eid, tok) in enumerate(tokens.items())))
    return ok, bad


def measure(pid: int, run: object) -> tuple[float, float]:
    """(CPU seconds of ``pid``, wall seconds) over ``run()``."""
    assert callable(run)
    c0, t0 = cpu_seconds(pid), time.monotonic()
    run()
    return cpu_seconds(pid) - c0, time.monotonic() - t0


def _phase(
    pid: int, base: str, tokens: dict[str, str], route: str, window: float
) -> tuple[tuple[float, float], tuple[int, int]]:
    box: list[tuple[int, int]] = []
    spent = measure(pid, lambda: box.append(asyncio.run(load(base, tokens, route, window))))
    return spent, box[0]


def _keep_lease(client: redis.Redis, key: str, stop: threading.Event) -> None:
    while not stop.wait(2.0):
        client.pexpire(key, 60_000)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, default=1000)
    ap.add_argument("--lease", type=float, default=120.0, help="the lease (s); workers renew every quarter")
    ap.add_argument(
        "--window", type=float, default=None, help="seconds per phase (default: one renewal interval)"
    )
    args = ap.parse_args()
    interval = args.lease / 4
    window = args.window or interval
    with private_redis("bench-lease-") as port, tempfile.TemporaryDirectory() as work:
        url = f"redis://127.0.0.1:{port}/0"
        client = redis.Redis.from_url(url)
        spec = swarm_spec(args.workers)
        launcher = MemoryLauncher()
        r = Recovery(client, "bench", holder="ctl-a", catalog=None, launcher=launcher)
        plans = r.ensure_seats(spec)
        tokens = {p.execution_id: p.worker_token.get_secret_value() for p in plans}
        api_port = free_port()
        cfg = {
            "redis_url": url,
            "port": api_port,
            "store_root": str(Path(work) / "store"),
            "operator_token": secrets.token_urlsafe(24),
            "holder": "ctl-a",
            "swarms": {"bench": spec.model_dump(by_alias=True, mode="json", exclude_none=True)},
        }
        (Path(work) / "store").mkdir()
        env = dict(os.environ, CONTROL_API_CONFIG=json.dumps(cfg), PYTHONPATH=str(ROOT / "tests"))
        proc = subprocess.Popen(
            [sys.executable, "-m", "testsupport.control_api_process"], env=env, stderr=subprocess.DEVNULL
        )
        base = f"http://127.0.0.1:{api_port}"
        stop = threading.Event()
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(base + "/healthz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit("the control API did not start")
                time.sleep(0.2)
            # The operator's passes would renew the swarm's lease; here nothing does: keep its key alive.
            keeper = threading.Thread(
                target=_keep_lease, args=(client, r.keys.control_owner, stop), daemon=True
            )
            keeper.start()
            asyncio.run(load(base, dict(list(tokens.items())[:50]), "lease", 1.0))  # warm-up
            idle_cpu, idle_wall = measure(proc.pid, lambda: time.sleep(window))
            got: dict[str, tuple[int, int]] = {}
            cpu: dict[str, tuple[float, float]] = {}
            for route in ("watermark", "lease"):
                cpu[route], got[route] = _phase(proc.pid, base, tokens, route, window)
        finally:
            stop.set()
            proc.terminate()
            proc.wait(10)
    n = args.workers
    print(
        f"{n} workers, lease {args.lease:g} s: each renews every {interval:g} s "
        f"= {60 / interval:.1f} requests/min"
    )
    print(f"phase window {window:g} s (one renewal interval: every worker once)")
    print(
        f"  idle          control API CPU {idle_cpu:6.2f} s = {100 * idle_cpu / idle_wall:5.1f} % of a core"
    )
    for route in ("watermark", "lease"):
        c, wall = cpu[route]
        ok, bad = got[route]
        print(
            f"  {route:<13} control API CPU {c:6.2f} s = {100 * c / wall:5.1f} % of a core, "
            f"{1000 * c / max(1, ok):.2f} ms per request ({ok} answered 200, {bad} not)"
        )
    renew = cpu["lease"][0] - idle_cpu * cpu["lease"][1] / idle_wall
    beat = cpu["watermark"][0] - idle_cpu * cpu["watermark"][1] / idle_wall
    print(f"renewal / heartbeat CPU per request (idle subtracted): {renew / max(beat, 1e-9):.2f}x")
    print(
        f"renewals of {n} workers at the real rate: {100 * renew / cpu['lease'][1]:.1f} % of a core "
        "above idle on the replica that answers them"
    )


if __name__ == "__main__":
    main()
