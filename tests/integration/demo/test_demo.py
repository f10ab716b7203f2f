"""``make demo`` in its CI mode: the story's outcomes are checked by the demo and again here.

The demo's own ``--ci`` checks (replacements, continuity, refusals, metrics)
make it exit non-zero on any wrong outcome; this test also reads what it
printed and checks that every process it started is gone afterwards, both
after a normal run and after Ctrl-C while ``--keep`` holds everything up.
The same story runs on the embedded emulator (the default) and on the real
control plane (``--control-plane``), where the API server's audit log also
shows what the operator and the simulated kubelet did through it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from .conftest import REPO, demo_argv, demo_env, processes_using, requires_control_plane, run_demo

pytestmark = pytest.mark.slow

EMBEDDED = (
    "Kubernetes API: embedded emulator (kmock) — not a real API server; use --control-plane for a real one"
)
NAMESPACE = "agentihooks-demo"


def test_demo_story_outcomes_and_nothing_left_running(tmp_path: Path) -> None:
    work = tmp_path / "demo"
    done = run_demo("--ci", "--workdir", str(work))
    out = done.stdout
    assert done.returncode == 0, out[-4000:] + done.stderr[-2000:]
    assert EMBEDDED in out.splitlines()[:3]
    check_story(out, work)
    assert not (work / "control-plane").exists()


@pytest.mark.timeout(900)
def test_demo_story_on_the_real_control_plane(tmp_path: Path) -> None:
    """``--control-plane --ci``: the same story on etcd + kube-apiserver + kube-controller-manager, the
    operator holding only the chart's RBAC as its ServiceAccount, Pods bound and finished by the kubelet."""
    requires_control_plane()
    work = tmp_path / "demo"
    done = run_demo("--control-plane", "--ci", "--workdir", str(work), timeout=840)
    out = done.stdout
    assert done.returncode == 0, out[-4000:] + done.stderr[-2000:]
    assert "Kubernetes API: real control plane on loopback" in out.splitlines()[1]
    assert "kmock" not in out
    versions = re.search(r"\[start\] control plane at https://127\.0\.0\.1:\d+: (.*)", out)
    assert versions is not None, out[:3000]
    assert re.search(r"etcd: etcd Version: 3\.\d+\.\d+", versions.group(1))
    assert re.search(r"kube-apiserver: Kubernetes v1\.\d+\.\d+", versions.group(1))
    assert re.search(r"kube-controller-manager: Kubernetes v1\.\d+\.\d+", versions.group(1))
    assert f"namespace {NAMESPACE} enforces Pod Security 'restricted'" in out
    assert "SIMULATED kubelet (real kube-apiserver)" in out
    check_story(out, work)
    assert not (work / "control-plane" / "etcd-data").exists(), "etcd's data is removed at the end"

    calls: Counter[tuple[str, str, str, int]] = Counter()
    for line in (work / "control-plane" / "audit.log").read_text().splitlines():
        event = json.loads(line)
        ref = event.get("objectRef") or {}
        resource = ref.get("resource", "") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        code = int((event.get("responseStatus") or {}).get("code") or 0)
        calls[(event["user"]["username"], event["verb"], resource, code)] += 1
    operator = f"system:serviceaccount:{NAMESPACE}:"
    by_operator = {(v, r, c) for (u, v, r, c) in calls if u.startswith(operator)}
    assert ("create", "pods", 201) in by_operator and ("delete", "pods", 200) in by_operator
    assert not [call for call in by_operator if call[2] == 403], f"RBAC refused the operator: {by_operator}"
    users = {u for (u, *_rest) in calls}
    assert all(u == "envtest-admin" or u.startswith(operator) for u in users), users
    kubelet = {(v, r, c) for (u, v, r, c) in calls if u == "envtest-admin"}
    # eight worker Pods (four seats, two generations) bound to the registered Node, statuses through
    # the status subresource, the node's Lease renewed, and the graceful deletion of the Pod whose
    # image could not be pulled finished by the kubelet
    assert calls[("envtest-admin", "create", "pods/binding", 201)] == 8
    assert {("create", "nodes", 201), ("patch", "pods/status", 200), ("patch", "leases", 200)} <= kubelet
    assert ("delete", "pods", 200) in kubelet
    assert processes_using(work) == []


@pytest.mark.timeout(900)
def test_demo_story_on_a_real_node(tmp_path: Path) -> None:
    """``--real-node --ci``: the worker image on a real kubelet, containerd and runc; the kernel kills
    the container, the operator resumes it natively in a new one, and every outcome is checked."""
    requires_control_plane()
    from testsupport.realnode import why_not

    reason = why_not()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the real-node demo cannot run here: {reason}")
        pytest.skip(f"no real node: {reason}")
    work = tmp_path / "demo"
    done = run_demo("--real-node", "--ci", "--workdir", str(work), timeout=840)
    out = done.stdout
    assert done.returncode == 0, out[-4000:] + done.stderr[-2000:]
    assert "demo on a REAL node" in out.splitlines()[0]
    assert "SIMULATED" not in out
    assert re.search(r"\[start\] real node agentihooks-node at 10\.88\.1\.1: Kubernetes v1\.\d+\.\d+", out)
    assert re.search(r"the kernel ended swarm-exe-[0-9a-f]{32}: OOMKilled \(exit 137\)", out)
    assert re.search(r"verified exe-[0-9a-f]{32}-\d+ and resumed natively", out)
    status = out.split("== agentihooks swarm on-node status", 1)[1]
    assert re.search(r"node-1\s+bound\s+oom_killed; native resume", status)
    assert "replacements_admitted: 1 (ok)" in out and "(WRONG)" not in out
    assert "demo --ci: every outcome of the real-node story checked" in out
    kept = list((work / "logs" / "pods").glob("*/*/*.log"))
    assert kept, "the containers' logs are kept after the node is gone"
    assert any("restore_verified" in p.read_text() for p in kept)
    assert processes_using(work) == []


def check_story(out: str, work: Path) -> None:
    """What the story printed (continuity per seat, the refusal, the status table, the metrics) and
    that everything it started is gone."""
    assert "the kubelet is SIMULATED" in out
    assert "demo --ci: every outcome of the story checked" in out
    # eng-1 resumed natively without asking, eng-2 reconstructed after the CLI decision, eng-3 fresh
    assert re.search(r"eng-1: operator resumed without asking; .*recovery: native", out)
    assert re.search(r"eng-2: generation 2 logged .*recovery: reconstructed", out)
    assert re.search(r"eng-3: replaced fresh without a choice; .*recovery: fresh", out)
    assert re.search(r"cx-1: operator resumed without asking; .*recovery: native", out)  # Codex
    assert "error: no recovery decision is pending for this attempt" in out
    status = out.split("== agentihooks swarm demo status", 1)[1]
    rows = {line.split()[0]: line for line in status.splitlines() if line.startswith("eng-")}
    assert set(rows) == {"eng-1", "eng-2", "eng-3"}
    for kind in ("native", "reconstructed", "fresh"):
        series = (
            rf'agentihooks_restore_outcomes_by_type{{namespace="[a-z0-9-]+",swarm="demo",type="{kind}"}} 1'
        )
        assert re.search(series, out), kind
    assert re.search(r"Ledger page: http://127\.0\.0\.1:\d+/ledger/[a-z0-9-]+/demo", out)
    # one worker log per started Pod: four seats, two Pods each; the held eng-3 spawn never ran a worker
    logs = sorted(p.parent.name for p in (work / "node" / "pods").glob("*/worker.log"))
    assert len(logs) == 7
    assert (work / "operator-token").stat().st_mode & 0o077 == 0
    assert processes_using(work) == []


def test_ctrl_c_with_keep_stops_every_process(tmp_path: Path) -> None:
    work = tmp_path / "keep"
    log = (tmp_path / "out.txt").open("w")
    proc = subprocess.Popen(
        demo_argv("--keep", "--workdir", str(work)),
        cwd=REPO,
        env=demo_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 150
        text = ""
        while "--keep: everything keeps running" not in text:
            assert proc.poll() is None, (tmp_path / "out.txt").read_text()[-3000:]
            assert time.monotonic() < deadline, "the demo never reached --keep"
            time.sleep(0.5)
            text = (tmp_path / "out.txt").read_text()
        assert processes_using(work), "nothing was running while --keep held the demo up"
        ledger = re.search(r"Ledger page: (http://\S+)", text)
        assert ledger is not None
        page = httpx.get(ledger.group(1), timeout=10)
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        token = (work / "operator-token").read_text().strip()
        base = ledger.group(1).rsplit("/ledger/", 1)[0]
        status = httpx.get(f"{base}/v1/swarms/demo/status", headers={"Authorization": f"Bearer {token}"})
        assert status.status_code == 200
        assert {c["seat"]: c["continuity"] for c in status.json()["handoffs"]} == {
            "eng-1": "native",
            "eng-2": "reconstructed",
            "eng-3": "fresh",
        }
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()
    out = (tmp_path / "out.txt").read_text()
    assert "interrupted: stopping every process the demo started" in out
    assert processes_using(work) == []
