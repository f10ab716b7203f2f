"""Warm an image's files into the page cache from outside the Pods, so a memory limit kills.

Why this exists: the kernel charges a page of the page cache to the memory
cgroup of whoever first reads it. When a container is the first to read its
own image's files (the node binary, Claude Code's script, Python's libraries),
those pages count against the container's limit. A container growing towards
that limit then does not die: reclaim keeps evicting its own code pages and the
container keeps reading them back, each time "making progress", so the memory
cgroup's OOM killer never runs and the container crawls for minutes (seen in a
CI run: no kill within 300 s, with the machine's page cache cold; reproduced by
dropping the caches before the demo). On a real node the image was usually just
unpacked by containerd, whose cgroup then holds those pages; this module makes
that the case here, deterministically: it reads every file of the image's
layers from the test process, whose cgroup then owns them, so a container's
reclaim cannot touch them and its anonymous memory alone decides the kill.

A container that was killed this way before may have evicted pages it had
charged to itself, so tests warm the image again right before each Pod meant to
die at its limit (cheap when the files are cached: nothing is read from disk).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

Ctr = Callable[..., subprocess.CompletedProcess[str]]
CHUNK = 1 << 20


class WarmFailed(RuntimeError):
    """The image's layers could not be found through containerd (the message names the step)."""


def chain_ids(diff_ids: list[str]) -> list[str]:
    """The OCI chain IDs of a layer stack: the snapshot keys containerd unpacked them under."""
    chain: list[str] = []
    for diff in diff_ids:
        if not chain:
            chain.append(diff)
        else:
            chain.append("sha256:" + hashlib.sha256(f"{chain[-1]} {diff}".encode()).hexdigest())
    return chain


def _json(ctr: Ctr, digest: str, what: str) -> dict:
    res = ctr("content", "get", digest)
    if res.returncode != 0:
        raise WarmFailed(f"reading the {what} {digest} from containerd failed: {res.stderr.strip()}")
    return json.loads(res.stdout)


def layer_dirs(ctr: Ctr, ref: str) -> list[Path]:
    """The snapshot folders holding ``ref``'s unpacked layers, lowest first."""
    listed = ctr("images", "ls", f"name=={ref}")
    rows = [ln.split() for ln in listed.stdout.splitlines()[1:] if ln.strip()]
    if listed.returncode != 0 or not rows:
        why = listed.stderr.strip() or "not imported"
        raise WarmFailed(f"containerd does not list the image {ref}: {why}")
    manifest = _json(ctr, rows[0][2], "manifest")
    if "manifests" in manifest:  # an index: the linux/amd64 manifest, else the first
        chosen = next(
            (m for m in manifest["manifests"] if (m.get("platform") or {}).get("architecture") == "amd64"),
            manifest["manifests"][0],
        )
        manifest = _json(ctr, chosen["digest"], "manifest")
    config = _json(ctr, manifest["config"]["digest"], "image config")
    top = chain_ids(config["rootfs"]["diff_ids"])[-1]
    key = f"agentihooks-warm-{os.getpid()}"
    ctr("snapshots", "rm", key)  # a view an interrupted warm left behind
    view = ctr("snapshots", "view", "--mounts", key, top)
    try:
        if view.returncode != 0:
            raise WarmFailed(f"a view of {ref}'s layers ({top}) failed: {view.stderr.strip()}")
        dirs: list[Path] = []
        for raw in json.loads(view.stdout):
            mount = {k.lower(): v for k, v in raw.items()}  # ctr prints Go's field names
            for option in mount.get("options") or []:
                if option.startswith("lowerdir="):
                    dirs += [Path(d) for d in option.removeprefix("lowerdir=").split(":")]
            if mount.get("type") == "bind":  # a one-layer image is bind-mounted
                dirs.append(Path(mount["source"]))
        if not dirs:
            raise WarmFailed(f"a view of {ref}'s layers named no folder: {view.stdout.strip()[:300]}")
        return dirs[::-1]  # overlay lists the top layer first
    finally:
        ctr("snapshots", "rm", key)


def read_tree(folder: Path) -> int:
    """Read every regular file under ``folder`` once (into the page cache); the bytes read."""
    total = 0
    buf = bytearray(CHUNK)
    seen: set[tuple[int, int]] = set()  # a hard link's pages are its file's: read once
    for top, _dirs, files in os.walk(folder):
        for name in files:
            path = os.path.join(top, name)
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                continue  # a symlink or a socket: no pages to warm
            try:
                st = os.fstat(fd)
                if stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) not in seen:  # no FIFO, no device
                    seen.add((st.st_dev, st.st_ino))
                    while n := os.readv(fd, [buf]):
                        total += n
            finally:
                os.close(fd)
    return total


def warm(ctr: Ctr, ref: str) -> int:
    """Read all of ``ref``'s layer files from this process; the bytes read."""
    return sum(read_tree(d) for d in layer_dirs(ctr, ref))
