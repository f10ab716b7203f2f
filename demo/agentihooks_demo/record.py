"""The evidence record ``evidence/SV2-CKP-05/result.json``: shape, versions and provenance of one run.

The shape follows the original swarm v2 evidence records (``package``,
``package_complete``, ``tested_commit``, ``status``, ``evidence_class``,
``interfaces``, ``supported_versions``, ``cases``, ``remaining_limitations``)
and adds a run id and times, ``mocked`` with ``mocked_parts`` (``mocked`` is true whenever any part
of a case was simulated or faked, and ``mocked_parts`` says which),
the backend it ran on (on the real control plane: what etcd, kube-apiserver
and kube-controller-manager report as their versions, and the operator's
identity), and the versions of every part involved.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from .controlplane import BINARIES
from .harness import harness_versions
from .stack import KubeApi, Stack

PACKAGE = "SV2-CKP-05"

INTERFACES = [
    "POST /v1/executions/{execution}/restore-decision",
    "POST /v1/swarms/{swarm}/seats/{seat}/restore-request",
    "agentihooks swarm NAME restore-decision SEAT resume|fresh",
    "GET /v1/swarms/{swarm}/status (handoffs: checkpoint, resume_available, resume_label, continuity)",
    "launch record restore directive (checkpoint_id, recovery, session_id, watermark)",
    "POST /v1/executions/{execution}/outcome",
    'worker log line {"event": "restore_verified", ...}',
    "metric restore_outcomes_by_type",
]

SUPPORTED_VERSIONS = {
    "checkpoint_schema": ["2.0", "2.1", "2.2"],
    "launch_record_schema": [1],
    "native_resume": {"claude": "2.1.x", "codex": "0.162.x"},
}

EMULATOR_LIMITATION = (
    "The Kubernetes API is kmock's emulator and the kubelet is simulated: worker Pods run as local "
    "processes, and OOM kills and image-pull failures are injected by the simulated kubelet."
)
CONTROL_PLANE_LIMITATION = (
    "The Kubernetes API is a real control plane on loopback (etcd, kube-apiserver, kube-controller-manager), "
    "but in the cases that ran on the simulated kubelet (each case's ran_on) there is no container runtime: "
    "the simulated kubelet binds each Pod "
    "to its Node and runs the worker as a local process (no image is pulled, no memory limit applies); "
    "OOM kills and image-pull failures are injected by it and written as a kubelet would write them."
)
FAKE_HARNESS_LIMITATION = (
    "In the cases that ran on the simulated kubelet the harnesses are the fake claude/codex executables with "
    "the real CLIs' surface, not Claude Code or Codex themselves."
)
REAL_HARNESS_LIMITATION = (
    "The real-harness cases run Claude Code and Codex themselves (versions under harnesses) against a "
    "loopback model API with scripted replies, not a real model, and at worker level: two agentihooks-worker "
    "boot processes with launch records and a local checkpoint store, the replacement's restore directive "
    "written as the controller writes it and the OOM kill a SIGKILL of every process of the attempt; the "
    "operator and the Kubernetes API take no part in them."
)
LIMITATIONS = [
    "A kind backend for this command is not implemented: with KUBECONFIG set the run still starts its own "
    "Kubernetes API and says so under backend.",
    "Transcript written after the archive watermark is lost and its length is unknown; the fence names it.",
]


def _run(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except OSError:
        return "unavailable"
    return (done.stdout or done.stderr).strip().splitlines()[0] if (done.stdout or done.stderr) else ""


def _dist(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def versions(bin_dir: Path, kube: KubeApi) -> dict[str, Any]:
    fakes = harness_versions(bin_dir)
    api = {"kmock": _dist("kmock")} if kube.plane is None else {"helm": kube.versions.get("helm", "")}
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "agentihooks-recovery": _dist("agentihooks-recovery"),
        "redis-server": _run(["redis-server", "--version"]),
        "kopf": _dist("kopf"),
        "kubernetes-py": _dist("kubernetes"),
        **api,
        "aiohttp": _dist("aiohttp"),
        "redis-py": _dist("redis"),
        "pydantic": _dist("pydantic"),
        "git": _run(["git", "--version"]),
        "fake_harness": {"claude": fakes["claude"], "codex": fakes["codex"], "path": str(bin_dir)},
    }


def _git(*args: str) -> str:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def backend(
    kube: KubeApi, node: dict[str, Any] | None = None, simulated: list[str] | None = None
) -> dict[str, Any]:
    requested = os.environ.get("KUBECONFIG")
    kind = (
        f"not used: KUBECONFIG={requested} was set, but this command has no kind backend yet"
        if requested
        else "not used (no KUBECONFIG given; a kind backend is not implemented for this command)"
    )
    redis = "private redis-server started by the run"
    if kube.plane is None:
        return {
            "kubernetes_api": "kmock KubernetesEmulator on 127.0.0.1 (embedded)",
            "kubelet": "simulated: real agentihooks-worker processes on the local machine",
            "redis": redis,
            "kind": kind,
        }
    return {
        "kubernetes_api": (
            "real control plane on 127.0.0.1 started by the run: etcd, kube-apiserver (RBAC authorization, "
            f"Pod Security admission enforcing 'restricted' on namespace {kube.namespace}) and "
            "kube-controller-manager"
        ),
        "control_plane": {name: kube.versions.get(name, "unknown") for name in BINARIES},
        "operator_identity": (
            f"{kube.operator_user}: a TokenRequest token, bound only to the chart's RBAC "
            f"(helm template, {kube.versions.get('helm', 'helm')})"
        ),
        "kubelet": (
            (f"{_names(simulated)}: " if _node_ran(node) and simulated else "")
            + "simulated: registers a Node and renews its Lease, binds Pods through the binding "
            "subresource, writes statuses through the status subresource and finishes graceful "
            "deletions; the workers are real agentihooks-worker processes on the local machine"
            + (
                f"; the real-node cases: {node['versions'].get('kubelet')} with "
                f"{node['versions'].get('containerd')} and {node['versions'].get('runc')}"
                if node is not None and _node_ran(node)
                else ""
            )
        ),
        "node": node if node is not None else {"skipped": "not part of this run"},
        "redis": redis,
        "kind": kind,
    }


def mocked_parts(
    stack: Stack, node: dict[str, Any] | None = None, simulated: list[str] | None = None
) -> list[str]:
    """What of this run was simulated or faked (empty only when nothing was): the kubelet of the cases
    that ran on the simulated kubelet (``simulated``: their ids), their fake harnesses, and the model
    the real CLIs talk to. A case on the real node has no simulated part but that model."""
    kube = "kmock's emulated Kubernetes API and " if stack.kube.plane is None else ""
    parts = []
    if simulated is None or simulated:
        where = f"in {_names(simulated)}" if _node_ran(node) and simulated else "in every case"
        parts += [
            f"{kube}the kubelet {where}: simulated (Pod statuses written by a stand-in, workers run as "
            "local processes)",
            f"the harness {where.replace('every case', 'the acceptance cases')}: the fake claude/codex "
            "executables",
        ]
    parts.append(
        "the model the real Claude Code and Codex talk to (real-harness"
        + (" and real-node" if _node_ran(node) else "")
        + " cases): a loopback server with scripted replies"
    )
    return parts


def _names(ids: list[str] | None) -> str:
    shown = list(ids or [])
    return "case " + shown[0] if len(shown) == 1 else "cases " + ", ".join(shown)


def _node_ran(node: dict[str, Any] | None) -> bool:
    return bool(node) and "skipped" not in (node or {})


NODE_LIMITATION = (
    "The real-node case runs the project's worker image on one real node (a real kubelet, "
    "kube-scheduler and kube-proxy, containerd and runc) beside the loopback control plane; the "
    "images are built on this machine and imported, never pulled from a registry; the image's files "
    "are read into the page cache by the harness before the Pod starts (so the container's memory "
    "limit kills it instead of leaving it to thrash on its own code pages, tests/testsupport/"
    "nodecache.py). The conversation-mismatch case (a worker stopped between a session report and "
    "its capture, which a real worker never is) still runs under the simulated kubelet, as does the "
    "version case where the unqualified Claude Code is not installed (each case's ran_on says where "
    "it ran)."
)


def build_record(
    cases: list[dict[str, Any]],
    *,
    metrics: dict[str, float],
    started: str,
    bin_dir: Path,
    stack: Stack,
    harnesses: list[dict[str, Any]] | None = None,
    node: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The record. A ``skipped`` case fails nothing but is never counted as passed: the package is
    complete only when every case ran and passed. ``node``: the real node's versions and images, or
    ``{"skipped": reason}``."""
    ran = [c for c in cases if c["result"] != "skipped"]
    simulated = [c["id"] for c in ran if c.get("ran_on") == "simulated kubelet"]
    skipped = [c["id"] for c in cases if c["result"] == "skipped"]
    passed = bool(ran) and all(c["result"] == "pass" for c in ran)
    harnesses = harnesses or []
    real_ran = any(h.get("result") != "skipped" for h in harnesses)
    if harnesses and not real_ran:
        real_limitation = "The real-harness cases were skipped: " + "; ".join(
            sorted({str(h.get("skip_reason")) for h in harnesses})
        )
    else:
        real_limitation = REAL_HARNESS_LIMITATION
    return {
        "package": PACKAGE,
        "package_complete": passed and not skipped,
        "tested_commit": _git("rev-parse", "HEAD"),
        "tested_tree_clean": _git("status", "--porcelain", "--untracked-files=no") == "",
        "status": "passed" if passed else "failed",
        "evidence_class": (
            "live-embedded"
            if stack.kube.plane is None
            else "live-control-plane-and-real-node"
            if _node_ran(node)
            else "live-control-plane"
        ),
        "mocked": bool(mocked_parts(stack, node, simulated)),
        "mocked_parts": mocked_parts(stack, node, simulated),
        "run": {
            "id": str(uuid.uuid4()),
            "started_at": started,
            "finished_at": datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        },
        "backend": backend(stack.kube, node, simulated),
        "versions": versions(bin_dir, stack.kube),
        "interfaces": INTERFACES,
        "supported_versions": SUPPORTED_VERSIONS,
        "cases": cases,
        "skipped_cases": skipped,
        "harnesses": harnesses,
        "metrics": {k: v for k, v in sorted(metrics.items()) if "restore_outcomes_by_type" in k},
        "remaining_limitations": [
            EMULATOR_LIMITATION if stack.kube.plane is None else CONTROL_PLANE_LIMITATION,
            *([NODE_LIMITATION] if _node_ran(node) else []),
            *([FAKE_HARNESS_LIMITATION] if simulated else []),
            *([real_limitation] if harnesses else []),
            *LIMITATIONS,
        ],
    }


def write_record(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.part")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)
