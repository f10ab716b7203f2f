"""Hostile connections: half-open requests, idle sockets, slow bodies, too many clients, garbage heads.

Each test starts its own control API with short timeouts (the same ``AGENTIHOOKS_CONTROL_*``
settings the operator reads) and talks to it over raw sockets. No timing is asserted: a test waits,
with a generous bound, for the server to have closed what it must close.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import pytest
from agentihooks_operator.api.limits import ServerLimits
from testsupport.control_api import World, make_world

BOUND = 60.0  # seconds: generous; the timeouts under test are one or two seconds


@contextmanager
def world_with_env(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **env: str
) -> Iterator[World]:
    for name, value in env.items():
        monkeypatch.setenv(f"AGENTIHOOKS_CONTROL_{name.upper()}", value)
    with make_world(redis_url, tmp_path) as w:
        yield w


def address(w: World) -> tuple[str, int]:
    url = httpx.URL(w.url)
    assert url.host and url.port
    return url.host, url.port


def until(check: Callable[[], bool], what: str, bound: float = BOUND) -> None:
    deadline = time.monotonic() + bound
    while not check():
        assert time.monotonic() < deadline, f"not within {bound} s: {what}"
        time.sleep(0.05)


def closed_by_server(sock: socket.socket) -> bool:
    """True once the server closed ``sock`` (anything it wrote before, such as a 408, is read away)."""
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except BlockingIOError:
        return False
    except (ConnectionResetError, BrokenPipeError):
        return True


def open_sockets(where: tuple[str, int], n: int, stack: ExitStack, first: bytes = b"") -> list[socket.socket]:
    out = []
    for _ in range(n):
        s = stack.enter_context(socket.create_connection(where, timeout=BOUND))
        if first:
            s.sendall(first)
        s.setblocking(False)
        out.append(s)
    return out


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_300_half_open_connections_are_closed_after_the_header_timeout(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with (
        world_with_env(redis_url, tmp_path, monkeypatch, header_timeout="1") as w,
        ExitStack() as stack,
    ):
        # a partial request line, never finished: the classic slow-loris
        socks = open_sockets(address(w), 300, stack, first=b"GET /v1/swarms/swarm-a/status HTT")
        peak = w.server.open_connections
        until(lambda: all(closed_by_server(s) for s in socks), "all 300 half-open connections closed")
        assert peak <= ServerLimits().max_connections
        # the API answers as before once they are gone
        assert httpx.get(w.url + "/healthz", timeout=BOUND).status_code == 200
        until(lambda: w.server.open_connections == 0, "no connection left open")


def test_the_header_timeout_answers_408_before_closing(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agentihooks.api")
    with world_with_env(redis_url, tmp_path, monkeypatch, header_timeout="1") as w:
        with socket.create_connection(address(w), timeout=BOUND) as s:
            s.sendall(b"POST /v1/executions/x/outcome HTTP/1.1\r\nHost: x\r\nContent-Le")
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408 ")
        assert b"X-Content-Type-Options: nosniff" in head and b"Cache-Control: no-store" in head
        assert b'"error": "header_timeout"' in body
        lines = [r for r in caplog.records if "did not arrive in time" in r.getMessage()]
        assert len(lines) == 1 and lines[0].levelno == logging.INFO and lines[0].exc_info is None


def test_connections_past_the_cap_wait_and_the_process_never_holds_more_sockets(
    redis_url: str, tmp_path: Path
) -> None:
    cap = 20
    limits = ServerLimits(header_timeout=1.0, max_connections=cap, backlog=128)
    with make_world(redis_url, tmp_path, limits) as w, ExitStack() as stack:
        before = open_fds()
        socks = open_sockets(address(w), 60, stack)  # connect and send nothing
        time.sleep(0.5)  # let the server accept what it will
        # 60 client sockets here, and at most `cap` server-side ones: the rest wait in the listen queue
        assert w.server.open_connections <= cap
        assert open_fds() - before <= 60 + cap + 5
        # a real client queued behind them is served once the idle ones time out
        assert httpx.get(w.url + "/healthz", timeout=BOUND).status_code == 200
        until(lambda: all(closed_by_server(s) for s in socks), "every idle connection closed")
        assert w.server.open_connections <= cap


def test_an_idle_keep_alive_connection_is_closed_after_the_keep_alive_timeout(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with (
        world_with_env(redis_url, tmp_path, monkeypatch, keepalive_timeout="1") as w,
        socket.create_connection(address(w), timeout=BOUND) as s,
    ):
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        first = s.recv(65536)
        assert first.startswith(b"HTTP/1.1 200 ")
        s.setblocking(False)
        until(lambda: closed_by_server(s), "the idle keep-alive connection closed")


def test_a_body_that_stops_arriving_is_408_body_timeout_and_the_connection_closes(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with world_with_env(redis_url, tmp_path, monkeypatch, body_timeout="1") as w:
        eid = w.first["swarm-a"].execution_id
        op = w.tokens["operator"]
        with socket.create_connection(address(w), timeout=BOUND) as s:
            s.sendall(
                f"POST /v1/executions/{eid}/restore-decision HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Bearer {op}\r\nContent-Type: application/json\r\n"
                "Content-Length: 100\r\n\r\n".encode()
                + b'{"choice": "fre'
            )
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 408 ")
        assert b'"error": "body_timeout"' in answer


def test_an_upload_that_pauses_too_long_is_408_and_leaves_no_file(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with world_with_env(redis_url, tmp_path, monkeypatch, body_timeout="1") as w:
        w.state.spool_dir = str(tmp_path / "spool")
        (tmp_path / "spool").mkdir()
        eid = w.first["swarm-a"].execution_id
        query = (
            f"key=objects/sha256/{'0' * 64}&swarm=swarm-a&task_id=task-1&task_generation=1&namespace=default"
        )
        with socket.create_connection(address(w), timeout=BOUND) as s:
            s.sendall(
                f"PUT /v1/executions/{eid}/checkpoint-store/object?{query} HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Bearer {w.worker_token(eid)}\r\n"
                "Content-Type: application/octet-stream\r\nContent-Length: 1000000\r\n\r\n".encode()
                + b"x" * 1000
            )
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 408 ") and b'"error": "body_timeout"' in answer
        assert list((tmp_path / "spool").iterdir()) == []


@pytest.mark.parametrize(
    "head",
    [
        b"GET /" + b"a" * 10_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",  # request line over the limit
        b"GET /healthz HTTP/1.1\r\nX-Big: " + b"b" * 10_000 + b"\r\n\r\n",  # header line over the limit
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64 + b"\r\n\r\n",  # TLS on the HTTP port
    ],
    ids=["long-request-line", "long-header", "not-http"],
)
def test_a_malformed_request_head_is_400_json_logged_once_at_info_without_traceback(
    world: World, caplog: pytest.LogCaptureFixture, head: bytes
) -> None:
    caplog.set_level(logging.DEBUG)
    url = httpx.URL(world.url)
    assert url.host and url.port
    with socket.create_connection((url.host, url.port), timeout=BOUND) as s:
        s.sendall(head)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    status, _, rest = answer.partition(b"\r\n")
    assert status.split(b" ")[1] == b"400", answer[:200]
    assert b'"error": "malformed_request"' in rest
    assert b"X-Content-Type-Options: nosniff" in rest and b"Cache-Control: no-store" in rest
    records = [r for r in caplog.records if r.name.startswith(("agentihooks", "aiohttp"))]
    assert [(r.levelno, r.name) for r in records] == [(logging.INFO, "agentihooks.api")]
    assert records[0].exc_info is None and "Traceback" not in caplog.text


def test_at_the_cap_an_idle_keep_alive_connection_makes_room_for_a_waiting_client(
    redis_url: str, tmp_path: Path
) -> None:
    cap = 5
    # a keep-alive timeout far longer than the client waits: only reclaiming an idle one can serve it
    limits = ServerLimits(max_connections=cap, keepalive_timeout=600.0)
    with make_world(redis_url, tmp_path, limits) as w, ExitStack() as stack:
        socks = open_sockets(address(w), cap, stack)
        for s in socks:  # one answered request each, then kept alive, idle
            s.setblocking(True)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert s.recv(65536).startswith(b"HTTP/1.1 200 ")
            s.setblocking(False)
        assert w.server.open_connections == cap
        assert httpx.get(w.url + "/healthz", timeout=BOUND).status_code == 200
        assert sum(closed_by_server(s) for s in socks) >= 1
        assert w.server.open_connections <= cap


def test_a_tokenless_trickle_holding_every_slot_never_keeps_a_master_out(
    redis_url: str, tmp_path: Path
) -> None:
    """The flood of issue 48: connections with no token, each sending one header byte every so often,
    hold every slot. The header timeout is long here (600 s), so a slot would free up only when the
    client gave up: before, a master queued behind them waited for that. Now, at the cap, the
    connection that has been sending an unfinished head the longest (past the 0.5 s grace) gives its
    slot to the queued client, whose head arrives at once, and its request is answered."""
    cap = 16
    limits = ServerLimits(header_timeout=600.0, max_connections=cap, backlog=128, head_grace=0.5)
    with make_world(redis_url, tmp_path, limits) as w, ExitStack() as stack:
        where = address(w)
        socks = open_sockets(where, cap + 40, stack, first=b"GET /healthz HTTP/1.1\r\nHo")
        until(lambda: w.server.open_connections == cap, "every slot taken by a trickling connection")
        for _ in range(3):  # the master is answered, again and again, while the flood goes on
            r = httpx.get(w.url + "/v1/swarms", headers={"Authorization": "Bearer nope"}, timeout=BOUND)
            assert r.status_code == 401  # answered (a refusal of its token, not a wait for a slot)
            for s in socks:  # the trickle goes on
                with contextlib.suppress(OSError):
                    s.send(b"s")
        assert w.server.site.stalled_closed >= 1  # type: ignore[union-attr]
        assert w.server.open_connections <= cap


def _from(where: tuple[str, int], source: str, stack: ExitStack, first: bytes = b"") -> socket.socket:
    s = stack.enter_context(socket.create_connection(where, timeout=BOUND, source_address=(source, 0)))
    if first:
        s.sendall(first)
    return s


def _answer_of(s: socket.socket) -> bytes:
    """What the server wrote until it closed its side."""
    s.setblocking(True)
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    return out


def test_one_address_holds_at_most_its_share_of_the_slots_and_others_are_served(
    redis_url: str, tmp_path: Path
) -> None:
    """Issue 48: per-source limits where the source can be known. One address (a Pod, a host) holding
    its share of connections, here trickling request heads far below the cap, gets its next one
    answered ``429 too_many_connections`` at once, before a byte of it is read; another address is
    served; once one of the first address's connections closes, it is served again. (Loopback is
    exempt by default, for ``kubectl port-forward``; this listener exempts nothing.)"""
    share = 4
    limits = ServerLimits(
        header_timeout=600.0,
        head_grace=600.0,
        max_connections=64,
        max_connections_per_source=share,
        per_source_exempt=(),
    )
    with make_world(redis_url, tmp_path, limits) as w, ExitStack() as stack:
        where = address(w)
        held = [_from(where, "127.0.0.2", stack, b"GET /healthz HTTP/1.1\r\nHo") for _ in range(share)]
        until(lambda: w.server.open_connections == share, "the address's share taken")
        extra = _from(where, "127.0.0.2", stack, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = _answer_of(extra)
        assert answer.startswith(b"HTTP/1.1 429 ") and b"too_many_connections" in answer, answer
        assert b"Retry-After: 5" in answer
        with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.3"), timeout=BOUND) as other:
            assert other.get(w.url + "/healthz").status_code == 200  # another address: served
        held[0].close()
        until(lambda: w.server.open_connections == share - 1, "one of the address's connections closed")
        again = _from(
            where, "127.0.0.2", stack, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        assert _answer_of(again).startswith(b"HTTP/1.1 200 ")
        assert w.server.site.source_refused == 1  # type: ignore[union-attr]


def test_loopback_is_exempt_by_default(redis_url: str, tmp_path: Path) -> None:
    """Every client of ``kubectl port-forward`` arrives from loopback: the default leaves it alone."""
    limits = ServerLimits(header_timeout=600.0, head_grace=600.0, max_connections_per_source=2)
    with make_world(redis_url, tmp_path, limits) as w, ExitStack() as stack:
        open_sockets(address(w), 6, stack, first=b"GET /healthz HTTP/1.1\r\nHo")
        until(lambda: w.server.open_connections == 6, "six loopback connections held")
        assert httpx.get(w.url + "/healthz", timeout=BOUND).status_code == 200
        assert w.server.site.source_refused == 0  # type: ignore[union-attr]
