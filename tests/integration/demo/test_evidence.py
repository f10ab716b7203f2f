"""``make evidence`` writes a record that this very run produced (run id, commit, input hashes).

The record's run id is the one the run printed; every checkpoint input's
sha256 is recomputed from the manifest bytes left in the run's own store; the
five cases are there with their expected and observed outcomes; the backend
is the real control plane, named by the versions its binaries report. The
real-harness cases name Claude Code and Codex at the versions the CLIs
themselves reported, and say the resumed request carried the earlier turns
(``skipped``, never passed, only where npm is missing outside CI). Where the
machine can host a real node (always under ``CI=true``), the valid, corrupt and
duplicate cases and a Codex whole-container kill ran the worker image on a real
kubelet, containerd and runc with the real CLIs, each case says where it ran,
and the record's simulated parts name only the two cases left on the simulated
kubelet and the model.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from agentihooks_demo.realresume import DUMMY_ANTHROPIC_KEY, DUMMY_OPENAI_KEY
from testsupport import real_clis

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
#: The real CLIs' cases: harness name -> what ``<cli> --version`` prints at the pinned version.
REAL = {
    "claude": f"{real_clis.PINNED[real_clis.CLAUDE_PACKAGE]} (Claude Code)",
    "codex": f"codex-cli {real_clis.PINNED[real_clis.CODEX_PACKAGE]}",
}
REAL_CASES = {f"real-harness-{h}" for h in REAL}


def real_clis_present() -> str | None:
    """``None`` when the pinned CLIs are installed (installing them if npm is there), else why not.

    Outside CI a machine without npm still runs the evidence; its real-harness cases must then be
    ``skipped``. Under ``CI=true`` the CLIs must be there (``scripts/install-deps.sh`` installs them).
    """
    try:
        real_clis.ensure(real_clis.PINNED)
    except real_clis.NpmMissing as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{e} (CI=true: scripts/install-deps.sh must provide npm)")
        return str(e)
    except real_clis.InstallFailed as e:
        pytest.fail(str(e))
    return None


def real_node_present() -> str | None:
    """``None`` where this machine can host the real node (then the record must hold its case), else
    why not; under ``CI=true`` the tier may not vanish (as the ``real_node`` fixture)."""
    from testsupport.realnode import why_not

    reason = why_not()
    if reason is not None and os.environ.get("CI") == "true":
        pytest.fail(f"the real-node case cannot run here: {reason}")
    return reason


@pytest.mark.timeout(1500)
def test_evidence_record_is_produced_by_the_run(tmp_path: Path) -> None:
    requires_control_plane()
    missing = real_clis_present()
    no_node = real_node_present()
    out = tmp_path / "SV2-CKP-05" / "result.json"
    work = tmp_path / "work"
    done = run_demo("--evidence", str(out), "--workdir", str(work), timeout=1440)
    assert done.returncode == 0, done.stdout[-4000:]
    record = json.loads(out.read_text())
    printed = re.search(r"evidence record: .* \(run ([0-9a-f-]{36}), status passed\)", done.stdout)
    assert printed is not None and printed.group(1) == record["run"]["id"]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True)
    assert record["tested_commit"] == head.stdout.strip()
    assert record["package"] == "SV2-CKP-05"
    # honest about what was simulated: the kubelet of the cases that ran on it, their fake harnesses,
    # the model the real CLIs talk to
    parts = record["mocked_parts"]
    assert record["mocked"] is True and any("the kubelet" in p and "simulated" in p for p in parts)
    assert any("fake claude/codex" in p for p in parts)
    assert any("scripted replies" in p for p in parts)
    on_node = {c["id"] for c in record["cases"] if c["ran_on"] == "real node"}
    assert on_node == (set() if no_node else ON_NODE)
    for part in parts:  # a case on the real node is never said to be simulated
        assert not any(cid in part for cid in on_node), part
    complete = missing is None and no_node is None
    assert record["status"] == "passed" and record["package_complete"] is complete
    for key in ("evidence_class", "interfaces", "supported_versions", "remaining_limitations", "versions"):
        assert record[key]
    backend = record["backend"]
    assert "real control plane" in backend["kubernetes_api"] and "simulated" in backend["kubelet"]
    assert "kmock" not in json.dumps(backend)
    check_node(record, no_node)
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
    assert set(cases) == set(CASES) | REAL_CASES | ({NODE_CASE} if no_node else {CODEX_CASE})
    check_harnesses(record, cases, work, missing)
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
                        f"checkpoints/namespaces/agentihooks-demo/swarms/*/tasks/*/gen-1/checkpoints/{item['checkpoint_id']}/committed.json"
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


NODE_CASE = "real-node-native-resume"
CODEX_CASE = "real-node-codex-container-kill"
#: The acceptance cases that run on the real node where there is one.
ON_NODE = {
    "valid-checkpoint",
    "corrupt-object",
    "unsupported-harness-version",
    "duplicated-restore-request",
    CODEX_CASE,
}


def check_node(record: dict, no_node: str | None) -> None:
    """The real-node cases: on a real kubelet, containerd and runc with the worker image built here and
    the real CLIs: the kernel's OOM kill and an automatic native resume; a corrupt object refused by the
    replacement; a real pull failure, then one replacement for three posts; a Codex container killed
    whole and resumed natively."""
    node = record["backend"]["node"]
    if no_node is not None:  # outside CI, on a machine that cannot host a node: skipped, never passed
        case = next(c for c in record["cases"] if c["id"] == NODE_CASE)
        assert case["result"] == "skipped" and no_node in case["skip_reason"]
        assert NODE_CASE in record["skipped_cases"] and no_node in node["skipped"]
        assert record["evidence_class"] == "live-control-plane"
        assert any("in every case" in p for p in record["mocked_parts"])
        return
    cases = {c["id"]: c for c in record["cases"]}
    for cid in ON_NODE:
        assert cases[cid]["result"] == "pass" and cases[cid]["ran_on"] == "real node", cases[cid]
    valid = cases["valid-checkpoint"]
    assert valid["expected"] == {
        "first_container": "OOMKilled",
        "fence_reason": "oom_killed",
        "decided_by": "automatic",
        "continuity": "native",
        "turns_carried": True,
        "replacements_admitted": 1,
    }
    observed = valid["observed"]
    assert observed["released"] == ["grant", "account"]
    assert observed["worker_line"]["recovery"] == "native"
    assert len(observed["pods_created"]) == 2 == len(set(observed["pods_created"]))
    corrupt = cases["corrupt-object"]["observed"]
    assert corrupt["first_container"] == "OOMKilled" and corrupt["worker_line"]["event"] == "restore_refused"
    # the seat's card shows the refusal and waits for a relaunch; what it offers is never the one refused
    refused = next(i for i in cases["corrupt-object"]["inputs"] if "checkpoint_id" in i)["checkpoint_id"]
    assert corrupt["card_after_refusal"]["refusal"] == "corrupt_object"
    assert corrupt["card_after_refusal"]["offered_checkpoint"] != refused
    duplicate = cases["duplicated-restore-request"]["observed"]
    assert duplicate["pull_failure"] == "ErrImageNeverPull" and duplicate["turns_carried"] is True
    version = cases["unsupported-harness-version"]["observed"]
    # the replacement ran the other Claude Code the image's tag was loaded with, and said which
    assert version["first_container"] == "OOMKilled" and "2.0.77" in str(version["worker_line"]["detail"])
    codex = cases[CODEX_CASE]
    assert codex["expected"]["fence_reason"] == "application_exit"
    assert codex["observed"]["worker_line"]["recovery"] == "native"
    assert record["evidence_class"] == "live-control-plane-and-real-node"
    versions = node["versions"]
    assert re.fullmatch(r"Kubernetes v1\.\d+\.\d+", versions["kubelet"]), versions
    assert versions["containerd"].startswith("containerd ") and versions["runc"].startswith("runc version")
    assert node["images"]["worker"].startswith("agentihooks.local/") and node["images"]["pause"]
    assert versions["kubelet"] in record["backend"]["kubelet"]
    for cid in ("valid-checkpoint", "corrupt-object", CODEX_CASE):
        image = next(i for i in cases[cid]["inputs"] if i["name"] == "Swarm spec (JSON)")["image"]
        assert image == node["images"]["worker"]


def check_harnesses(record: dict, cases: dict, work: Path, missing: str | None) -> None:
    """The harness section: both real CLIs, the versions they reported, their earlier turns carried."""
    text = json.dumps(record)
    assert DUMMY_ANTHROPIC_KEY not in text and DUMMY_OPENAI_KEY not in text
    harnesses = {h["harness"]: h for h in record["harnesses"]}
    assert set(harnesses) == set(REAL)
    if missing is not None:  # outside CI, without npm: skipped and saying why, never passed
        assert record["skipped_cases"] == sorted(REAL_CASES)
        for name in REAL:
            assert harnesses[name]["result"] == cases[f"real-harness-{name}"]["result"] == "skipped"
            assert harnesses[name]["skip_reason"]
        return
    assert record["skipped_cases"] == []
    for name, line in REAL.items():
        case = cases[f"real-harness-{name}"]
        pinned = real_clis.PINNED[real_clis.PACKAGE_OF[name]]
        row = harnesses[name]
        assert case["result"] == row["result"] == "pass", case["observed"]
        assert case["expected"] == {
            "harness": name,
            "version": pinned,
            "continuity": "native",
            "turns_carried": True,
        }
        observed = case["observed"]
        # the version the worker read, the CLI's own line, the version that wrote the session: all real
        assert row["version"] == observed["version"] == pinned
        assert row["version_output"] == observed["version_output"] == line
        assert row["session_written_by"] == pinned
        assert row["npm_package"] == f"{real_clis.PACKAGE_OF[name]}@{pinned}"
        assert row["turns_carried"] is True and observed["turn_checks"]
        assert all(observed["turn_checks"].values())
        session = observed["session_id"]
        assert row["resume_command"] == (
            ["claude", "-p", "--resume", session]
            if name == "claude"
            else ["codex", "exec", "resume", session]
        )
        assert observed["resume_command_is_the_adapters"] is True and observed["exit_code"] == 0
        store = work / "real-harness" / name / "store"
        for item in case["inputs"]:
            assert re.fullmatch(r"[0-9a-f]{64}", item["sha256"])
            if "checkpoint_id" in item:
                (committed,) = store.glob(
                    f"swarms/*/tasks/*/gen-1/checkpoints/{item['checkpoint_id']}/committed.json"
                )
                pointer = json.loads(committed.read_text())
                manifest = committed.parents[2] / pointer["manifest"]
                assert hashlib.sha256(manifest.read_bytes()).hexdigest() == item["sha256"]


def test_committed_record_comes_from_a_run_of_this_history() -> None:
    """The record in the repository was written by ``make evidence`` at a commit of this branch."""
    record = json.loads((REPO / "evidence" / "SV2-CKP-05" / "result.json").read_text())
    assert record["mocked"] is True and record["status"] == "passed"
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
    # the real-harness cases are there in a record written since they exist, and passed like the rest
    assert (
        set(CASES) <= {c["id"] for c in record["cases"]} <= set(CASES) | REAL_CASES | {NODE_CASE, CODEX_CASE}
    )
    assert all(c["result"] == "pass" for c in record["cases"])
