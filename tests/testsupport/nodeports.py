"""Which ports the real node needs on its address, and who holds one that is taken.

Why this exists: the kubelet (10250) and the node's DNS (53, UDP and TCP) listen on ``NODE_IP``. A
program already listening there (or on every address) makes them exit with a bind error deep in a
log, or, worse, answer in their place. ``up`` checks first and refuses with the port and the holding
process named (read from ``/proc/net`` and the owners' file descriptors), before anything starts.
"""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path

#: (port, protocol, what listens there on the node address).
NEEDED = ((10250, "tcp", "the kubelet"), (53, "udp", "the node's DNS"), (53, "tcp", "the node's DNS"))


def _bindable(host: str, port: int, proto: str) -> bool:
    kind = socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM
    with socket.socket(socket.AF_INET, kind) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Go's listeners do
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _inodes(port: int, proto: str) -> set[str]:
    """Socket inodes bound to ``port`` (any address), from /proc/net/{tcp,udp}{,6}."""
    found = set()
    for table in (f"/proc/net/{proto}", f"/proc/net/{proto}6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if len(fields) > 9 and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    found.add(fields[9])
    return found


def holders(port: int, proto: str) -> list[str]:
    """``"pid N (comm)"`` of every process holding a socket bound to ``port``."""
    wanted = {f"socket:[{i}]" for i in _inodes(port, proto)}
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if any(str(fd.readlink()) in wanted for fd in (proc / "fd").iterdir()):
                out.append(f"pid {proc.name} ({(proc / 'comm').read_text().strip()})")
    return sorted(out)


def taken(host: str) -> str | None:
    """Why the node cannot listen where it must on ``host``, naming port and holder; else ``None``."""
    for port, proto, what in NEEDED:
        if not _bindable(host, port, proto):
            who = ", ".join(holders(port, proto)) or "a process this user cannot see"
            return f"{proto} port {port} on {host}, which {what} needs, is taken by {who}"
    return None
