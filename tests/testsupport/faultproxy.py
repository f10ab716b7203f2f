"""A real TCP fault proxy between chosen processes and the servers they use, for the fault campaign.

Two parts, each with start, stop and a teardown that survives a killed run:

* :class:`FaultProxy`: a toxiproxy-server (built by scripts/fault-proxy.sh) and
  its HTTP API. One proxy per (client, server) pair; a *toxic* on it adds
  latency or cuts the link both ways (data held, connections left open: what a
  partition looks like to a client, which must time out on its own), and
  removing it heals. Started inside the campaign's :func:`.processes.owned_run`,
  so a SIGKILLed run's proxy is killed by the next run's sweep.
* :class:`Redirects`: the clients are not told about the proxies (nothing of the
  product is edited or configured for them). Each client process runs with a
  group id of its own, and an iptables ``nat`` chain redirects that group's TCP
  connections to a server's loopback port onto the proxy of that pair
  (``-m owner --gid-owner``; the proxy itself runs as group 0 and reaches the
  real port). A Sentinel's answer, a Redis failover, a kubeconfig: every
  connection to those ports goes through the proxy. The chain is named after
  the owning run's pid and start time, so the next run deletes the chains of
  runs that are gone.

Root only (iptables, setgid); :func:`unavailable` says why not elsewhere.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from pathlib import Path

import httpx

from .processes import _start_time, owner_token
from .redis_server import free_port

ROOT = Path(__file__).resolve().parents[2]
CHAIN_PREFIX = "AGH-FLT-"


def binary() -> str | None:
    """toxiproxy-server as scripts/fault-proxy.sh finds it (no build here), or ``None``."""
    done = subprocess.run(
        [str(ROOT / "scripts" / "fault-proxy.sh"), "--check"], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        return None
    path = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    return path or None


def unavailable() -> str | None:
    """Why partitions and latency cannot be injected on this machine, or ``None`` when they can."""
    if os.geteuid() != 0:
        return "not root (iptables redirects and per-replica group ids need it)"
    if shutil.which("iptables") is None:
        return "no iptables"
    if binary() is None:
        return "no toxiproxy-server (make fault-proxy builds it)"
    return None


class FaultProxy:
    """One toxiproxy-server on loopback and the proxies made through it."""

    def __init__(self, logdir: Path) -> None:
        self.logdir = logdir
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._http: httpx.Client | None = None
        #: proxy name -> its toxics now in place
        self.toxics: dict[str, set[str]] = {}

    def start(self) -> None:
        path = binary()
        if path is None:
            raise RuntimeError("no toxiproxy-server: run `make fault-proxy` (scripts/fault-proxy.sh)")
        self.port = free_port()
        self.logdir.mkdir(parents=True, exist_ok=True)
        with (self.logdir / "toxiproxy.log").open("ab") as log:
            self.proc = subprocess.Popen(
                [path, "-host", "127.0.0.1", "-port", str(self.port)], stdout=log, stderr=log
            )
        self._http = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=5)
        deadline = time.monotonic() + 20
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if self._http.get("/version").status_code == 200:
                    return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"toxiproxy-server did not start (see {self.logdir / 'toxiproxy.log'})")
            time.sleep(0.05)

    @property
    def http(self) -> httpx.Client:
        if self._http is None:
            raise RuntimeError("the fault proxy is not started")
        return self._http

    def add(self, name: str, upstream_port: int) -> int:
        """A proxy ``name`` to 127.0.0.1:``upstream_port``; returns the port it listens on."""
        port = free_port()
        body = {"name": name, "listen": f"127.0.0.1:{port}", "upstream": f"127.0.0.1:{upstream_port}"}
        self.http.post("/proxies", json={**body, "enabled": True}).raise_for_status()
        self.toxics[name] = set()
        return port

    def _toxic(self, proxy: str, toxic: str, kind: str, stream: str, attributes: dict[str, int]) -> None:
        body = {"name": toxic, "type": kind, "stream": stream, "toxicity": 1.0, "attributes": attributes}
        self.http.post(f"/proxies/{proxy}/toxics", json=body).raise_for_status()
        self.toxics[proxy].add(toxic)

    def latency(self, proxy: str, ms: int, jitter_ms: int = 0) -> None:
        """Every byte each way held ``ms`` (± ``jitter_ms``) before it goes on."""
        for stream in ("upstream", "downstream"):
            self._toxic(proxy, f"latency-{stream}", "latency", stream, {"latency": ms, "jitter": jitter_ms})

    def cut(self, proxy: str) -> None:
        """Nothing goes through either way; connections stay open (a partition, not a refusal)."""
        for stream in ("upstream", "downstream"):
            self._toxic(proxy, f"cut-{stream}", "timeout", stream, {"timeout": 0})

    def heal(self, proxy: str) -> None:
        """Every toxic of ``proxy`` removed: the link is whole again."""
        for toxic in sorted(self.toxics.get(proxy, ())):
            with contextlib.suppress(httpx.HTTPError):
                self.http.delete(f"/proxies/{proxy}/toxics/{toxic}")
            self.toxics[proxy].discard(toxic)

    def heal_all(self) -> None:
        with contextlib.suppress(httpx.HTTPError):
            self.http.post("/reset")
        for toxics in self.toxics.values():
            toxics.clear()

    def stop(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def _iptables(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["iptables", "-w", "-t", "nat", *args], capture_output=True, text=True, check=check)


def _chains() -> list[str]:
    listed = _iptables("-S", check=False).stdout.splitlines()
    return [line.split()[1] for line in listed if line.startswith(f"-N {CHAIN_PREFIX}")]


def _drop_chain(chain: str) -> None:
    while _iptables("-D", "OUTPUT", "-j", chain, check=False).returncode == 0:
        pass
    _iptables("-F", chain, check=False)
    _iptables("-X", chain, check=False)


def sweep_chains() -> list[str]:
    """Delete the redirect chains of runs that are gone (their pid dead or reused); returns them."""
    gone = []
    for chain in _chains():
        pid, _, started = chain[len(CHAIN_PREFIX) :].partition("-")
        if not (pid.isdigit() and _start_time(int(pid)) == started):
            _drop_chain(chain)
            gone.append(chain)
    return gone


class Redirects:
    """An iptables ``nat`` chain of this run: connections of one group id to a port go to another."""

    def __init__(self) -> None:
        pid, _, started = owner_token().partition(":")
        self.chain = f"{CHAIN_PREFIX}{pid}-{started}"[:28]
        self.rules: list[tuple[int, int, int]] = []

    def start(self) -> None:
        sweep_chains()
        _drop_chain(self.chain)
        _iptables("-N", self.chain)
        _iptables("-I", "OUTPUT", "1", "-j", self.chain)

    def route(self, gid: int, port: int, to_port: int) -> None:
        """TCP connections of group ``gid`` to 127.0.0.1:``port`` go to 127.0.0.1:``to_port``."""
        _iptables(
            "-A", self.chain, "-p", "tcp", "-d", "127.0.0.1", "--dport", str(port),
            "-m", "owner", "--gid-owner", str(gid), "-j", "REDIRECT", "--to-ports", str(to_port),
        )  # fmt: skip
        self.rules.append((gid, port, to_port))

    def stop(self) -> None:
        _drop_chain(self.chain)
        self.rules.clear()
