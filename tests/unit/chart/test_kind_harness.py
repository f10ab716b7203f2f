"""The kind harness is consistent with the chart, the images and the CRD, and its checks judge right.

No Docker engine runs here, so the harness itself runs only in tests/e2e (opt-in). What can be proven
without a cluster is proven here: the scripts parse, the tags agree, the manifests they apply are
valid, and the pure functions that decide pass/fail of each check accept exactly one replacement.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import kubernetes_validate
import pytest
import yaml
from agentihooks_operator.swarm import SwarmSpec
from testsupport.helm import ROOT, Helm, one

KIND = ROOT / "deploy" / "kind"
SCRIPTS = ["lib.sh", "up.sh", "check.sh", "down.sh", "run-all.sh"]


def _checks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("e2e_checks", KIND / "e2e_checks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["e2e_checks"] = module
    spec.loader.exec_module(module)
    return module


checks = _checks()


def _lib(var: str) -> str:
    out = subprocess.run(
        ["bash", "-c", f'source "{KIND / "lib.sh"}" && printf %s "${var}"'],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout


@pytest.mark.parametrize("script", SCRIPTS)
def test_scripts_parse_and_are_executable(script: str) -> None:
    path = KIND / script
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0
    if script != "lib.sh":
        assert path.stat().st_mode & 0o111


def test_scripts_refuse_clearly_without_a_docker_engine(tmp_path: Path) -> None:
    # A machine with the basic tools but none of docker, kubectl or python3 on its PATH.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("sed", "grep", "cat", "dirname"):
        found = shutil.which(tool)
        assert found
        (bindir / tool).symlink_to(found)
    res = subprocess.run(
        [shutil.which("bash") or "/bin/bash", str(KIND / "check.sh"), "oom"],
        capture_output=True,
        text=True,
        env={"PATH": str(bindir), "HOME": str(tmp_path)},
    )
    assert res.returncode == 3
    assert "kind harness: missing docker kubectl python3" in res.stderr


def test_worker_tag_is_derived_from_the_harness_pins() -> None:
    dockerfile = (ROOT / "deploy" / "Dockerfile.worker").read_text()
    assert "ARG CLAUDE_CODE_VERSION=2.1.332" in dockerfile
    assert "ARG CODEX_VERSION=0.162.1" in dockerfile
    tag = _lib("WORKER_TAG")
    assert tag == "0.1.0-claude2.1.332-codex0.162.1"
    example = yaml.safe_load((ROOT / "deploy" / "examples" / "swarm.yaml").read_text())
    assert SwarmSpec.model_validate(example["spec"]).compatibility_key == tag


def test_e2e_swarms_are_valid() -> None:
    image = _lib("WORKER_IMAGE")
    doc = yaml.safe_load((KIND / "e2e-swarm.yaml").read_text().replace("@WORKER_IMAGE@", image))
    spec = SwarmSpec.model_validate(doc["spec"])
    assert spec.image == image
    assert {s.name for s in spec.seats} == {"oom", "evict", "node-loss"}
    bad = checks._bad_image_swarm(image)
    bad_spec = SwarmSpec.model_validate(bad["spec"])
    assert bad_spec.image.endswith(":does-not-exist") and bad_spec.compatibility_key != spec.compatibility_key


def test_kind_values_render_valid_manifests(helm: Helm) -> None:
    docs = helm.render(KIND / "values.yaml")
    for doc in docs:
        kubernetes_validate.validate(doc, "1.35.0", strict=True)
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"agentihooks.io/role": "system"}
    assert pod["containers"][0]["imagePullPolicy"] == "Never"
    limitrange = yaml.safe_load((KIND / "limitrange.yaml").read_text())
    kubernetes_validate.validate(limitrange, "1.35.0", strict=True)


def test_cluster_has_a_system_node_and_two_agent_nodes() -> None:
    cluster = yaml.safe_load((KIND / "cluster.yaml").read_text())
    roles = [
        n.get("labels", {}).get("agentihooks.io/role") for n in cluster["nodes"] if n["role"] == "worker"
    ]
    assert sorted(roles) == ["agents", "agents", "system"]


# -- the checks' verdicts ------------------------------------------------------------------------
def _pod(
    name: str, generation: int, seat: str = "oom", phase: str = "Running", **extra: Any
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {
                "swarm.agentihooks.io/swarm": "e2e",
                "swarm.agentihooks.io/generation": str(generation),
            },
            "annotations": {"swarm.agentihooks.io/seat": seat},
            **extra,
        },
        "status": {"phase": phase, "containerStatuses": [{"ready": phase == "Running"}]},
    }


def test_replacements_count_only_later_generations_of_the_seat() -> None:
    pods = [_pod("a", 1), _pod("b", 2), _pod("c", 2, seat="evict"), _pod("d", 3, phase="Pending")]
    assert [p["metadata"]["name"] for p in checks.replacements(pods, "e2e", "oom", 1)] == ["b", "d"]
    assert checks.running_replacements(pods, "e2e", "oom", 1) is None, "d is not running yet"
    assert [p["metadata"]["name"] for p in checks.running_replacements(pods[:3], "e2e", "oom", 1)] == ["b"]
    terminating = _pod("e", 2, deletionTimestamp="2026-01-01T00:00:00Z")
    assert not checks.is_running(terminating)


def test_verdict_accepts_exactly_one_replacement_with_a_continuity() -> None:
    card = {"seat": "oom", "reason": "oom_killed", "continuity": "fresh", "at": "t1"}
    result = checks.verdict("oom", card, [_pod("b", 2)], 1)
    assert result == {
        "scenario": "oom",
        "reason": "oom_killed",
        "replacements": 1,
        "replacement": "b",
        "generation": 2,
        "continuity": "fresh",
    }


@pytest.mark.parametrize(
    ("card", "pods", "message"),
    [
        ({"reason": "evicted", "continuity": "fresh"}, [_pod("b", 2)], "fence reason is 'evicted'"),
        ({"reason": "oom_killed", "continuity": "fresh"}, [_pod("b", 2), _pod("x", 2)], "exactly one"),
        ({"reason": "oom_killed", "continuity": "fresh"}, [], "found 0"),
        ({"reason": "oom_killed", "continuity": "fresh"}, [_pod("b", 3)], "generation 3, not 2"),
        ({"reason": "oom_killed", "continuity": "pending"}, [_pod("b", 2)], "no continuity reported"),
    ],
)
def test_verdict_refuses_anything_else(
    card: dict[str, Any], pods: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(checks.CheckFailed, match=message):
        checks.verdict("oom", card, pods, 1)


def test_card_is_the_one_of_the_failed_execution() -> None:
    status = {
        "handoffs": [
            {"seat": "oom", "execution_id": "exe-old", "at": 1, "continuity": "fresh"},
            {"seat": "oom", "execution_id": "exe-new", "at": 2, "continuity": "pending"},
            {"seat": "evict", "execution_id": "exe-other", "at": 3},
        ]
    }
    assert checks.card_for(status, "oom", "exe-new")["at"] == 2
    assert checks.card_for(status, "oom", "exe-other") is None, "another seat's card"
    assert checks.card_for({}, "oom", "exe-new") is None
    assert checks.reported(checks.card_for(status, "oom", "exe-new")) is None, "still pending"
    assert checks.reported(checks.card_for(status, "oom", "exe-old"))["continuity"] == "fresh"
    pod = _pod("swarm-exe-new", 2)
    pod["metadata"]["labels"]["swarm.agentihooks.io/execution-id"] = "exe-new"
    assert checks.execution_of(pod) == "exe-new"


def test_main_reports_a_failed_check_as_one_json_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # kubectl cannot reach a cluster (no such context): the check fails with a clear line, exit 1.
    code = checks.main(
        [
            "evict",
            "--context",
            "no-such-context",
            "--namespace",
            "x",
            "--release",
            "r",
            "--cluster",
            "c",
            "--worker-image",
            "w:t",
            "--timeout",
            "1",
        ]
    )
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 1 and line["ok"] is False and line["scenario"] == "evict"


def test_decision_script_drives_the_real_cli(tmp_path: Path) -> None:
    """The command the checks exec in the operator Pod reaches the real `agentihooks` CLI's verb.

    No controller listens on the URL, so the CLI must fail with its one-line "unreachable" error (not a
    usage error, which would mean the verb or its arguments are wrong).
    """
    cli = shutil.which("agentihooks")
    assert cli, "the project's console scripts are installed"
    env = {
        "PATH": str(Path(cli).parent) + ":/usr/bin:/bin",
        "AGENTIHOOKS_CONTROL_URL": "http://127.0.0.1:9",
        "AGENTIHOOKS_OPERATOR_TOKEN": "t0ken",
        "HOME": str(tmp_path),
    }
    res = subprocess.run(
        ["sh", "-c", checks.DECIDE_SCRIPT, "e2e", "oom", "fresh"], capture_output=True, text=True, env=env
    )
    out = res.stdout + res.stderr
    assert res.returncode not in (0, 2), out
    assert out.strip().startswith("error:") and "Traceback" not in out
    assert "t0ken" not in out


def test_step_after_fence_follows_the_card_binding() -> None:
    from agentihooks_operator.recovery import cards

    assert (checks.AWAITING, checks.BOUND) == (cards.AWAITING, cards.BOUND), "same words as the operator"
    assert checks.step_after_fence(None) is None
    assert checks.step_after_fence({"binding": cards.RECOVERING}) is None, "not decided yet: keep waiting"
    assert checks.step_after_fence({"binding": cards.AWAITING}) == "decide"
    assert checks.step_after_fence({"binding": cards.BOUND, "successor": "exe-2"}) == "replaced"
