"""Benchmark a master's requests while a tokenless flood holds the control API's connections.

The control API (the real aiohttp server, default limits: 256 connections, a 10 s header timeout)
runs on a real redis-server. A flood of 300 connections with no token, each sending one header byte
every 2 s and reopened as soon as the server closes it, holds every slot. Meanwhile a master sends
authenticated requests one after another (``GET /v1/swarms`` with its token), each on a new
connection as a CLI does; per request the time to its answer.

Three phases in one run, interleaved round by round so the machine's noise hits them alike: no
flood (the baseline), the flood against the listener as built (a trickling connection gives its slot
to a waiting client past ``AGENTIHOOKS_CONTROL_HEAD_GRACE``), and the flood against the listener with
that eviction off (the grace set beyond the header timeout: the behaviour before issue 48). Not a
test: it asserts nothing. Figures: docs/security.md.
"""

from __future__ import annotations

import argparse
import selectors
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "bench")]

import httpx  # noqa: E402
import redis  # noqa: E402
from agentihooks_operator.api.limits import ServerLimits  # noqa: E402
from support.redisproc import private_redis  # noqa: E402
from testsupport.control_api import MASTER_A, make_world  # noqa: E402

TRICKLE = b"GET /v1/swarms HTTP/1.1\r\nX-Slow: "


class Flood:
    """``n`` tokenless connections trickling a header byte every ``every`` s, reopened when closed."""

    def __init__(self, host: str, port: int, n: int, every: float) -> None:
        self.where, self.n, self.every = (host, port), n, every
        self.stop = threading.Event()
        self.reopened = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Flood:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self._thread.join(timeout=10)

    def _open(self, sel: selectors.BaseSelector) -> None:
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(self.where)
        sel.register(s, selectors.EVENT_READ, {"sent": False, "next": time.monotonic()})

    def _run(self) -> None:
        sel = selectors.DefaultSelector()
        for _ in range(self.n):
            self._open(sel)
        while not self.stop.is_set():
            for key, _ in sel.select(timeout=0.05):
                s = key.fileobj
                try:
                    data = s.recv(65536)  # type: ignore[union-attr]
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:  # the server closed it (a 408 read away): open another at once
                    sel.unregister(s)
                    s.close()  # type: ignore[union-attr]
                    self.reopened += 1
                    self._open(sel)
            now = time.monotonic()
            for key in list(sel.get_map().values()):
                state = key.data
                if now >= state["next"]:
                    try:
                        key.fileobj.send(b"a" if state["sent"] else TRICKLE)  # type: ignore[union-attr]
                        state["sent"] = True
                    except OSError:
                        pass
                    state["next"] = now + self.every
        for key in list(sel.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]


def master_requests(url: str, token: str, count: int) -> list[float]:
    out = []
    for _ in range(count):
        t0 = time.perf_counter()
        with httpx.Client(timeout=60, headers={"Authorization": f"Bearer {token}"}) as c:
            r = c.get(url + "/v1/swarms")
        assert r.status_code == 200, r.text
        out.append(time.perf_counter() - t0)
    return out


def phase(redis_url: str, grace: float, flood: int, count: int) -> list[float]:
    redis.Redis.from_url(redis_url).flushall()
    limits = ServerLimits(head_grace=grace)
    with tempfile.TemporaryDirectory() as tmp, make_world(redis_url, Path(tmp), limits) as w:
        url = httpx.URL(w.url)
        assert url.host and url.port
        if not flood:
            return master_requests(w.url, w.tokens[MASTER_A], count)
        with Flood(url.host, url.port, flood, 2.0):
            deadline = time.monotonic() + 30
            while w.server.open_connections < limits.max_connections and time.monotonic() < deadline:
                time.sleep(0.05)  # every slot taken by the flood first
            return master_requests(w.url, w.tokens[MASTER_A], count)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--flood", type=int, default=300, help="trickling connections (default 300)")
    p.add_argument(
        "--requests", type=int, default=10, help="master requests per phase and round (default 10)"
    )
    p.add_argument("--rounds", type=int, default=3, help="rounds of the three phases (default 3)")
    args = p.parse_args()
    phases = {"no flood": (0.5, 0), "flood": (0.5, args.flood), "flood, no eviction": (1e6, args.flood)}
    got: dict[str, list[float]] = {k: [] for k in phases}
    with private_redis("bench-flood-") as port:
        redis_url = f"redis://127.0.0.1:{port}/0"
        for _ in range(args.rounds):
            for name, (grace, flood) in phases.items():
                got[name] += phase(redis_url, grace, flood, args.requests)
    base = statistics.median(got["no flood"])
    print(
        f"a master's request while {args.flood} tokenless connections trickle"
        " (256 slots, 10 s header timeout)"
    )
    for name, values in got.items():
        values.sort()
        p50, p99 = statistics.median(values), values[min(len(values) - 1, int(len(values) * 0.99))]
        late = sum(v > 1.0 for v in values)
        print(
            f"{name:20} n={len(values)} p50 {p50 * 1000:8.1f} ms p99 {p99 * 1000:8.1f} ms"
            f" max {max(values):6.2f} s | over 1 s: {late} | p50 {p50 / base:.1f}x the baseline"
        )


if __name__ == "__main__":
    main()
