"""What a real-node test prints when a container does not end the way it expected.

A wait on a real container ("the container ended", "a fence came") can only say it timed out. The
questions that follow are always the same: did the container start at all, is its memory cgroup at
its limit and under OOM, which processes are in it, how big, in which state and with which
``oom_score_adj``, and what did the kubelet and containerd say about the Pod. :func:`diagnose`
answers them in one block of text that a failing assertion carries, so a failure seen once on a
loaded CI machine can be read afterwards instead of re-run.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

MEMORY = Path("/sys/fs/cgroup/memory")
#: cgroup v1 memory files worth reading for a container that should have been OOM-killed.
_V1_FILES = ("memory.limit_in_bytes", "memory.usage_in_bytes", "memory.max_usage_in_bytes", "memory.failcnt")
#: ``pgpgin``/``pgpgout`` racing while ``rss`` sits just under the limit is thrashing (nodecache.py).
_STAT_KEYS = (
    "cache",
    "rss",
    "mapped_file",
    "pgmajfault",
    "pgpgin",
    "pgpgout",
    "total_inactive_file",
    "total_active_file",
)
_PROC_KEYS = ("Name", "State", "VmRSS", "VmHWM")


def _read(path: Path) -> str:
    with contextlib.suppress(OSError):
        return path.read_text(errors="replace").strip()
    return "?"


def pod_cgroups(uid: str) -> list[Path]:
    """The Pod's cgroup v1 memory folders (the Pod's own and each container's), found by its UID."""
    if not MEMORY.is_dir():
        return []
    wanted = {f"pod{uid}", f"pod{uid.replace('-', '_')}"}
    tops = [MEMORY / "kubepods", *MEMORY.glob("*/kubepods"), *MEMORY.glob("*/*/kubepods")]
    found = [p for top in tops if top.is_dir() for p in top.rglob("pod*") if p.is_dir() and p.name in wanted]
    return [q for pod in found for q in [pod, *sorted(c for c in pod.iterdir() if c.is_dir())]]


def _cgroup(folder: Path) -> list[str]:
    lines = [f"cgroup {folder.relative_to(MEMORY)}"]
    lines += [f"  {name} = {_read(folder / name)}" for name in _V1_FILES]
    oom = _read(folder / "memory.oom_control").replace("\n", ", ")
    lines.append(f"  memory.oom_control = {oom}")
    stat = dict(ln.split(" ", 1) for ln in _read(folder / "memory.stat").splitlines() if " " in ln)
    lines.append("  memory.stat: " + ", ".join(f"{k}={stat.get(k, '?')}" for k in _STAT_KEYS))
    for pid in _read(folder / "cgroup.procs").split():
        lines.append("  " + _process(Path("/proc") / pid))
    return lines


def _process(proc: Path) -> str:
    pairs = (ln.split(":", 1) for ln in _read(proc / "status").splitlines() if ":" in ln)
    status = {k: v.strip() for k, v in pairs}
    argv = _read(proc / "cmdline").replace("\0", " ")[:120]
    fields = " ".join(f"{k}={status.get(k, '?')}" for k in _PROC_KEYS)
    return f"pid {proc.name}: {fields} oom_score_adj={_read(proc / 'oom_score_adj')} argv={argv!r}"


def _mentions(log: Path, needles: list[str], limit: int = 40) -> list[str]:
    with contextlib.suppress(OSError):
        lines = log.read_text(errors="replace").splitlines()
        return [ln[:400] for ln in lines if any(n in ln for n in needles)][-limit:]
    return []


def diagnose(node: Any, pod: dict[str, Any] | None) -> str:
    """A report on ``pod`` (as last read from the API server) on the real ``node``: its status, its
    memory cgroups and processes, and the kubelet's and containerd's lines naming it."""
    if not pod:
        return "diagnosis: the Pod is gone from the API server"
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    lines = [
        f"diagnosis of Pod {meta.get('name')} (uid {meta.get('uid')}) on the real node",
        f"phase={status.get('phase')} conditions="
        + ", ".join(f"{c.get('type')}={c.get('status')}" for c in status.get("conditions") or []),
    ]
    for cs in status.get("containerStatuses") or []:
        lines.append(f"container {cs.get('name')}: id={cs.get('containerID')} state={cs.get('state')}")
    groups = pod_cgroups(str(meta.get("uid", "")))
    if not groups:
        lines.append("no memory cgroup of this Pod under kubepods (never started, or already removed)")
    for folder in groups:
        lines += _cgroup(folder)
    needles = [str(meta.get("name")), str(meta.get("uid"))]
    for cs in status.get("containerStatuses") or []:
        needles.append(str(cs.get("containerID", "")).removeprefix("containerd://"))
    needles = [n for n in needles if n and n != "None"]
    for name in ("kubelet", "containerd"):
        lines.append(f"--- {name}.log lines naming the Pod")
        lines += _mentions(node.logs / f"{name}.log", needles)
    return "\n".join(lines)
