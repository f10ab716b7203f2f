"""Benchmark one worker trickling uploads against another swarm's worker uploading beside it.

Issue 48's case: one worker's four trickling uploads held 1,019 MiB of the 1 GiB upload spool for a
minute, and another swarm's worker got ``507 spool_full``. The control API (the real aiohttp server)
runs on a real redis-server with the spool scaled down (``--spool`` MiB, shares as configured). The
hog, a replacement of swarm-a, opens its four uploads at once, each declaring a quarter of the spool,
sends nearly all of each and then trickles a byte a second. Once it holds what it can, a worker of
swarm-b uploads ``--other`` MiB, ``--uploads`` times, each on a new connection: its answer and time.

Two phases, interleaved round by round: the listener as built (a credential holds at most half of
the spool, a swarm three quarters, an upload must average 64 KiB/s after a 10 s grace), and the same
listener with the shares and the floor off (the behaviour before issue 48). Per phase: what the hog
held at most, the other worker's answers and times, and how long the hog's uploads lived. Not a
test: it asserts nothing. Figures: docs/security.md.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import select
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlencode, urlparse

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "bench")]

import redis  # noqa: E402
from agentihooks_operator.api.access.auth import sha256_hex  # noqa: E402
from support.redisproc import private_redis  # noqa: E402
from testsupport.control_api import World, make_world  # noqa: E402

MIB = 1024 * 1024


def head(w: World, execution: str, swarm: str, size: int, data: bytes) -> bytes:
    key = "objects/sha256/" + hashlib.sha256(data).hexdigest()
    query = urlencode(
        {"swarm": swarm, "task_id": "task-1", "task_generation": "1", "namespace": "default", "key": key}
    )
    host = urlparse(w.url).netloc
    return (
        f"PUT /v1/executions/{execution}/checkpoint-store/object?{query} HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {w.worker_token(execution)}\r\nContent-Type: application/octet-stream\r\n"
        f"Content-Length: {size}\r\nConnection: close\r\n\r\n"
    ).encode()


class Hog:
    """Four uploads of one credential: nearly all of each sent at once, then a byte a second."""

    def __init__(self, w: World, execution: str, each: int) -> None:
        self.w, self.execution, self.each = w, execution, each
        self.stop = threading.Event()
        self.answers: list[tuple[float, bytes]] = []
        self._threads = [threading.Thread(target=self._one, daemon=True) for _ in range(4)]
        self.started = time.monotonic()

    def __enter__(self) -> Hog:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self._threads:
            t.join(timeout=10)

    def _one(self) -> None:
        data = os.urandom(self.each)
        u = urlparse(self.w.url)
        assert u.hostname and u.port
        try:
            with socket.create_connection((u.hostname, u.port), timeout=120) as s:
                s.sendall(head(self.w, self.execution, "swarm-a", self.each, data))
                s.sendall(data[: self.each - 4096])
                s.settimeout(1.0)
                sent = self.each - 4096
                while not self.stop.is_set() and sent < self.each:
                    try:
                        got = s.recv(4096)
                        self.answers.append((time.monotonic() - self.started, got.split(b"\r\n")[0]))
                        return
                    except TimeoutError:
                        s.send(data[sent : sent + 1])
                        sent += 1
        except OSError as e:
            self.answers.append((time.monotonic() - self.started, repr(e).encode()))


def other_upload(w: World, execution: str, size: int) -> tuple[int, float]:
    data = os.urandom(size)
    u = urlparse(w.url)
    assert u.hostname and u.port
    t0 = time.perf_counter()
    got = b""
    with socket.create_connection((u.hostname, u.port), timeout=120) as s:
        s.sendall(head(w, execution, "swarm-b", size, data))
        readable, _, _ = select.select([s], [], [], 0.5)  # a refusal comes before the body is read
        try:
            if not readable:
                s.sendall(data)
            while b"\r\n" not in got:
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
        except ConnectionResetError:
            pass
    status = int(got.split(b" ", 2)[1]) if got.startswith(b"HTTP/") else 0
    return status, time.perf_counter() - t0


def phase(redis_url: str, shares: bool, args: argparse.Namespace) -> dict[str, object]:
    redis.Redis.from_url(redis_url).flushall()
    with tempfile.TemporaryDirectory() as tmp, make_world(redis_url, Path(tmp)) as w:
        q = w.state.quotas
        q.spool_bytes = args.spool * MIB
        if not shares:
            q.credential_share = q.swarm_share = 1.0
            w.state.upload_min_rate = 0.0
        lost = w.fail()
        w.checkpoint(lost)
        hog_eid = (
            w.recoveries["swarm-a"].decide(lost, "resume", "operator", spec=w.specs["swarm-a"]).replacement
        )
        assert hog_eid is not None
        digest = sha256_hex(w.worker_token(hog_eid))
        other = w.first["swarm-b"].execution_id
        held = 0
        with Hog(w, hog_eid, q.spool_bytes // 4) as hog:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:  # until the hog holds what it can get
                now = q.spooled_by("credential", digest)
                if now == held and now > 0 and time.monotonic() - hog.started > 2:
                    break
                held = max(held, now)
                time.sleep(0.2)
            answers = [other_upload(w, other, args.other * MIB) for _ in range(args.uploads)]
            lived = time.monotonic() + args.watch
            while time.monotonic() < lived and len(hog.answers) < 4:
                held = max(held, q.spooled_by("credential", digest))
                time.sleep(0.2)
            hog_answers = list(hog.answers)
        return {"held": held, "answers": answers, "hog": hog_answers, "spool": q.spool_bytes}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--spool", type=int, default=256, help="the spool, MiB (default 256)")
    p.add_argument("--other", type=int, default=8, help="the other worker's upload, MiB (default 8)")
    p.add_argument("--uploads", type=int, default=5, help="the other worker's uploads per phase")
    p.add_argument("--watch", type=float, default=20.0, help="seconds the hog's uploads are watched")
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    rows: dict[str, list[dict[str, object]]] = {"shares and floor": [], "no shares, no floor": []}
    with private_redis("bench-spool-") as port:
        url = f"redis://127.0.0.1:{port}/0"
        for _ in range(args.rounds):
            rows["shares and floor"].append(phase(url, True, args))
            rows["no shares, no floor"].append(phase(url, False, args))
    print(
        f"one worker's 4 trickling uploads against another swarm's {args.other} MiB uploads"
        f" ({args.spool} MiB spool)"
    )
    for name, runs in rows.items():
        held = max(int(r["held"]) for r in runs) / int(runs[0]["spool"])  # type: ignore[call-overload]
        answers = [a for r in runs for a in r["answers"]]  # type: ignore[attr-defined]
        codes = sorted({c for c, _ in answers})
        times = [t for c, t in answers if c in (200, 201)]
        hog = [a for r in runs for a in r["hog"]]  # type: ignore[attr-defined]
        cut = [f"{t:.1f} s {line.decode(errors='replace')[:40]}" for t, line in hog]
        p50 = f"{statistics.median(times) * 1000:.0f} ms" if times else "-"
        print(f"{name:22} hog held at most {held:.0%} of the spool | other: answers {codes}, p50 {p50}"
              f" | hog's uploads ended: {cut or 'still open'}")  # fmt: skip


if __name__ == "__main__":
    main()
