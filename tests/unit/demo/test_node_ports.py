"""Who holds a port the real node needs (testsupport/nodeports.py), read from /proc as the refusal says it."""

from __future__ import annotations

import os
import socket

from testsupport.nodeports import _bindable, holders


def test_a_listening_socket_is_named_by_its_process_and_freed_when_closed() -> None:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", 0))  # every address, as a squatter on the kubelet's port would
    s.listen()
    port = s.getsockname()[1]
    try:
        assert not _bindable("127.0.0.1", port, "tcp")
        assert f"pid {os.getpid()} (" in " ".join(holders(port, "tcp"))
    finally:
        s.close()
    assert _bindable("127.0.0.1", port, "tcp")
    assert holders(port, "tcp") == []


def test_a_udp_socket_is_found_in_its_own_table() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        assert not _bindable("127.0.0.1", port, "udp")
        assert f"pid {os.getpid()} (" in " ".join(holders(port, "udp"))
