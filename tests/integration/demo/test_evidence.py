"""``make evidence`` writes a record that this very run produced (run id, commit, input hashes).

The record's run id is the one the run printed; every checkpoint input's
sha256 is recomputed from the manifest bytes left in the run's own store; the
five cases are there with their expected and observed outcomes; the backend
is the real control plane, named by the versions its binaries report.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest

from .conftest import REPO, processes_using, requires_control_plane, run_demo

pytestmark = pytest.mark.slow

CASES = {
    "valid-checkpoint": {"continuity": "native", "replacements_admitted": 1},
    "corrupt-object": {"refusal": "corrupt_object", "replacements_admitted": 1},
    "unsupported-harness-version": {"refusal": "unqualified_version", "replacements_admitted": 1},
    "conversation-mismatch": {
        "resume_label": "Continue from context",
        "continuity": "reconstructed",
        "replacements_admitted": 1,
    },
    "duplicated-restore-request": {"continuity": "native", "replacements_admitted": 1},
}


@pytest.mark.timeout(900)
def test_evidence_record_is_produced_by_the_run(tmp_path: Path) -> None:
    requires_control_plane()
    out = tmp_path / "SV2-CKP-05" / "result.json"
    work = tmp_path / "work"
    done = run_demo("--evidence", str(out), "--workdir", str(work), timeout=840)
    assert done.returncode == 0, done.stdout[-4000:]
    record = json.loads(out.read_text())
    printed = re.search(r"evidence record: .* \(run ([0-9a-f-]{36}), status passed\)", done.stdout)
    assert printed is not None and printed.group(1) == record["run"]["id"]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True)
    assert record["tested_commit"] == head.stdout.strip()
    assert record["package"] == "SV2-CKP-05" and record["mocked"] is False
    assert record["status"] == "passed" and record["package_complete"] is True
    for key in ("evidence_class", "interfaces", "supported_versions", "remaining_limitations", "versions"):
        assert record[key]
    backend = record["backend"]
    assert "real control plane" in backend["kubernetes_api"] and "simulated" in backend["kubelet"]
    assert record["evidence_class"] == "live-control-plane" and "kmock" not in json.dumps(backend)
    # the versions the binaries themselves report, as the run printed them
    plane = backend["control_plane"]
    assert set(plane) == {"etcd", "kube-apiserver", "kube-controller-manager"}
    assert re.fullmatch(r"etcd Version: 3\.\d+\.\d+", plane["etcd"])
    assert re.fullmatch(r"Kubernetes v1\.\d+\.\d+", plane["kube-apiserver"])
    assert plane["kube-controller-manager"] == plane["kube-apiserver"]
    assert ", ".join(f"{k}: {v}" for k, v in plane.items()) in done.stdout
    assert backend["operator_identity"].startswith("system:serviceaccount:agentihooks-demo:")
    assert record["versions"]["redis-server"].startswith("Redis server v=")
    assert record["versions"]["helm"].startswith("v")

    cases = {c["id"]: c for c in record["cases"]}
    assert set(cases) == set(CASES)
    for cid, expected in CASES.items():
        case = cases[cid]
        assert case["result"] == "pass"
        for key, value in expected.items():
            assert case["expected"][key] == value and case["observed"][key] == value, (cid, key)
        assert case["inputs"]
        for item in case["inputs"]:
            assert re.fullmatch(r"[0-9a-f]{64}", item["sha256"])
            if "checkpoint_id" in item:
                committed = list(
                    work.glob(
                        f"checkpoints/swarms/evidence/tasks/*/gen-1/checkpoints/{item['checkpoint_id']}/committed.json"
                    )
                )
                assert len(committed) == 1
                pointer = json.loads(committed[0].read_text())
                manifest = committed[0].parents[2] / pointer["manifest"]
                assert hashlib.sha256(manifest.read_bytes()).hexdigest() == item["sha256"]
    flipped = next(i for i in cases["corrupt-object"]["inputs"] if "recorded_sha256" in i)
    assert flipped["sha256"] != flipped["recorded_sha256"]
    answers = cases["duplicated-restore-request"]["observed"]["answers"]
    assert len(answers) == 3 and len({a["replacement"] for a in answers}) == 1
    assert [a["replayed"] for a in answers] == [False, True, True]
    assert processes_using(work) == []


def test_committed_record_comes_from_a_run_of_this_history() -> None:
    """The record in the repository was written by ``make evidence`` at a commit of this branch."""
    record = json.loads((REPO / "evidence" / "SV2-CKP-05" / "result.json").read_text())
    assert record["mocked"] is False and record["status"] == "passed"
    assert re.fullmatch(r"[0-9a-f-]{36}", record["run"]["id"])
    known = subprocess.run(["git", "cat-file", "-e", record["tested_commit"]], cwd=REPO, check=False)
    if known.returncode != 0:
        pytest.skip("the tested commit is not in this clone (shallow history)")
    ancestor = subprocess.run(
        ["git", "merge-base", "--is-ancestor", record["tested_commit"], "HEAD"], cwd=REPO, check=False
    )
    assert ancestor.returncode == 0, (
        f"tested_commit {record['tested_commit']} is not in this branch's history"
    )
    assert {c["id"] for c in record["cases"]} == set(CASES)
    assert all(c["result"] == "pass" for c in record["cases"])
