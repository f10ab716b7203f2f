"""Connections per peer address (api/sources.py): counted, bounded, and left alone where exempt."""

from __future__ import annotations

import socket

from agentihooks_operator.api.sources import REFUSED_ANSWER, Sources, peer


def test_an_address_holds_at_most_its_share_and_gets_it_back_as_connections_close() -> None:
    s = Sources(2, ("127.0.0.0/8",))
    assert s.admit("10.0.0.7") and s.admit("10.0.0.7")
    assert not s.admit("10.0.0.7") and s.refused == 1  # its third, refused, counted as nothing
    assert s.holding("10.0.0.7") == 2
    assert s.admit("10.0.0.8")  # another address has its own share
    s.leave("10.0.0.7")
    assert s.admit("10.0.0.7") and s.holding("10.0.0.7") == 2
    for _ in range(2):
        s.leave("10.0.0.7")
    assert s.holding("10.0.0.7") == 0


def test_exempt_networks_unknown_peers_and_a_zero_limit_are_never_refused() -> None:
    s = Sources(1, ("127.0.0.0/8", "::1/128", "10.1.0.0/16"))
    for source in ("127.0.0.1", "127.9.9.9", "::1", "10.1.2.3", "", "not-an-address"):
        assert s.admit(source) and s.admit(source), source
    assert s.admit("fe80::1%eth0") and not s.admit("fe80::1%eth0")  # a scoped IPv6 address is bounded
    assert s.admit("10.2.0.1") and not s.admit("10.2.0.1")
    unbounded = Sources(0)
    assert all(unbounded.admit("10.0.0.1") for _ in range(1000)) and unbounded.refused == 0


def test_the_refusal_is_the_apis_json_error_with_retry_after() -> None:
    head, _, body = REFUSED_ANSWER.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 429 ") and b"Retry-After: 5" in head and b"Connection: close" in head
    assert b'"error": "too_many_connections"' in body
    assert f"Content-Length: {len(body)}".encode() in head


def test_peer_is_the_address_without_its_port() -> None:
    a, b = socket.socketpair()
    with a, b:
        assert peer(a) == ""  # a Unix socket gives no address: never bounded
    with socket.create_server(("127.0.0.1", 0)) as srv, socket.create_connection(srv.getsockname()) as c:
        conn, _ = srv.accept()
        with conn:
            assert peer(conn) == "127.0.0.1" and c.getsockname()[0] == "127.0.0.1"
