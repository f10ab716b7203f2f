"""Look for a secret in every process a container's user can read, and in one process as root.

:data:`SCANNER` runs inside a container (``ctr tasks exec --user``), so it sees what the agent would:
each ``/proc/<pid>/environ``, ``cmdline`` and readable ``mem`` region its user may open. The needles
reach it hex-encoded in its arguments, so its own command line (which the others could read) never
holds one; it skips itself. It reads memory in chunks (the container's memory limit applies to it).
After the first pass it watches for new processes for a while (its first argument, seconds) and reads
each as it appears: a capture's ``git`` lives a few milliseconds.

:func:`tokens_in_memory` is the positive control, as root on the node: the worker's memory does hold
its live credential (found by the sha256 the controller stores), so a scan that finds nothing means
the credential is out of reach, not that the search was blind.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

#: What ``token_urlsafe(32)`` makes: 43 characters of the URL-safe base64 alphabet.
TOKEN = re.compile(rb"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])")
CHUNK = 8 << 20

SCANNER = r"""
import json, os, sys, time
watch = float(sys.argv[1])
needles = [bytes.fromhex(h) for h in sys.argv[2:]]
me = str(os.getpid())
out = {"uid": os.getuid(), "procs": 0, "read": {"environ": 0, "cmdline": 0, "mem": 0},
       "denied": {"environ": 0, "cmdline": 0, "mem": 0}, "git": 0, "mem_bytes": 0, "found": []}
def look(data, pid, where):
    for i, n in enumerate(needles):
        if n in data:
            out["found"].append({"needle": i, "pid": pid, "file": where})
def small(pid):
    for name in ("environ", "cmdline"):
        try:
            with open(f"/proc/{pid}/{name}", "rb") as f:
                data = f.read()
        except OSError:
            out["denied"][name] += 1
            continue
        out["read"][name] += 1
        if name == "cmdline" and data.split(b"\0")[0].endswith(b"git"):
            out["git"] += 1
        look(data, pid, name)
def memory(pid):
    try:
        maps = open(f"/proc/{pid}/maps").read().splitlines()
        mem = open(f"/proc/{pid}/mem", "rb", buffering=0)
    except OSError:
        out["denied"]["mem"] += 1
        return
    out["read"]["mem"] += 1
    keep = max(len(n) for n in needles) - 1
    with mem:
        for line in maps:
            span, perms = line.split()[:2]
            if not perms.startswith("r") or line.endswith("[vvar]") or line.endswith("[vsyscall]"):
                continue
            start, end = (int(x, 16) for x in span.split("-"))
            tail = b""
            while start < end:
                size = min(CHUNK, end - start)
                try:
                    mem.seek(start)
                    data = mem.read(size)
                except (OSError, OverflowError, ValueError):
                    break
                out["mem_bytes"] += len(data)
                look(tail + data, pid, "mem")
                tail = data[-keep:]
                start += size
seen = set()
for pid in os.listdir("/proc"):  # every process: its environment, command line and memory
    if pid.isdigit() and pid != me:
        seen.add(pid)
        out["procs"] += 1
        small(pid)
        memory(pid)
deadline = time.monotonic() + watch
while time.monotonic() < deadline:  # then every process started since (a capture's git lives ms)
    for pid in os.listdir("/proc"):
        if pid.isdigit() and pid != me and pid not in seen:
            seen.add(pid)
            out["procs"] += 1
            small(pid)
            memory(pid)
print(json.dumps(out))
""".replace("CHUNK", str(CHUNK))


def tokens_in_memory(pid: int, digests: set[str]) -> set[str]:
    """Every token-shaped string in process ``pid``'s readable memory whose sha256 is in ``digests``
    (root only: the worker marks itself not dumpable)."""
    found: set[str] = set()
    proc = Path("/proc") / str(pid)
    with (proc / "mem").open("rb", buffering=0) as mem:
        for line in (proc / "maps").read_text().splitlines():
            span, perms = line.split()[:2]
            if not perms.startswith("r") or line.endswith(("[vvar]", "[vsyscall]")):
                continue
            start, end = (int(x, 16) for x in span.split("-"))
            tail = b""
            while start < end:
                size = min(CHUNK, end - start)
                try:
                    mem.seek(start)
                    data = mem.read(size)
                except (OSError, OverflowError, ValueError):
                    break
                for m in TOKEN.finditer(tail + data):
                    if hashlib.sha256(m.group()).hexdigest() in digests:
                        found.add(m.group().decode())
                tail = data[-42:]
                start += size
    return found
