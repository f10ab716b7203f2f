"""The operator's and the worker's JSON log lines: the same fields, the Swarm on every line about one."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from agentihooks_operator import logs
from agentihooks_worker import logs as worker_logs


class Err:
    """What this test wrote to stderr (pytest's capture, which the handlers are made on)."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys

    def getvalue(self) -> str:
        return self.capsys.readouterr().err


@pytest.fixture
def stream(capsys: pytest.CaptureFixture[str]) -> Iterator[Err]:
    """stderr, captured; the root logger's handlers and level are put back afterwards."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    yield Err(capsys)
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])


def _lines(out: Err, logger: str) -> list[dict[str, Any]]:
    """The JSON lines of one logger: a thread an earlier test left behind may log beside this test."""
    lines = [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("logger") == logger]


def test_operator_json_lines_name_the_swarm_and_attempt(stream: Err) -> None:
    logs.configure("json")
    log = logging.getLogger("agentihooks_operator.test")
    log.info("outside any swarm")
    with logs.about_swarm("team-a", "example", "uid-1"):
        log.warning("recovery pass of %s/%s failed: %s", "team-a", "example", "boom")
        with logs.about_attempt("exe-1", "eng-1"):
            log.info("fenced")
            with ThreadPoolExecutor(1) as pool:  # a pool's thread, given the context by carry()
                pool.submit(logs.carry(log.info, "in a pool")).result()
                pool.submit(log.info, "not carried").result()
    outside, failed, fenced, pooled, bare = _lines(stream, "agentihooks_operator.test")
    assert "object" not in outside and outside["severity"] == "info" and outside["timestamp"]
    assert failed["message"] == "recovery pass of team-a/example failed: boom"
    assert failed["severity"] == "warn"
    assert failed["object"] == {
        "apiVersion": "agentihooks.io/v1alpha1",
        "kind": "Swarm",
        "namespace": "team-a",
        "name": "example",
        "uid": "uid-1",
    }
    assert "execution_id" not in failed and failed["logger"] == "agentihooks_operator.test"
    assert (fenced["execution_id"], fenced["seat"], fenced["object"]["name"]) == ("exe-1", "eng-1", "example")
    assert pooled["execution_id"] == "exe-1" and pooled["object"]["name"] == "example"
    assert "object" not in bare  # a thread that was not given the context names nothing


def test_kopfs_own_object_reference_is_kept(stream: Err) -> None:
    logs.configure("json")
    ref = {"apiVersion": "agentihooks.io/v1alpha1", "kind": "Swarm", "namespace": "ns", "name": "from-kopf"}
    with logs.about_swarm("ns", "other"):
        logging.getLogger("kopf.objects").error(
            "Handler 'validate' failed permanently", extra={"k8s_ref": ref}
        )
    [line] = _lines(stream, "kopf.objects")
    assert line["object"]["name"] == "from-kopf" and line["severity"] == "error"


def test_text_stays_the_default(stream: Err) -> None:
    logs.configure()
    with logs.about_swarm("ns", "example"):
        logging.getLogger("x").info("recovery pass of ns/example failed")
    lines = stream.getvalue().splitlines()
    assert any(line.endswith("INFO x: recovery pass of ns/example failed") for line in lines)
    with pytest.raises(ValueError):
        logs.configure("xml")


def test_worker_json_lines_carry_the_same_fields(stream: Err) -> None:
    worker_logs._IDENTITY.clear()  # a worker booted earlier in this process named itself
    worker_logs.configure("json")
    log = logging.getLogger("agentihooks_worker.boot")
    log.info("before the launch record")
    worker_logs.identify(swarm="example", namespace="team-a", seat="eng-1", execution_id="exe-9")
    try:
        log.warning("capture failed")
    finally:
        worker_logs._IDENTITY.clear()
    before, after = _lines(stream, "agentihooks_worker.boot")
    assert "object" not in before and before["severity"] == "info"
    assert after["object"] == {
        "apiVersion": "agentihooks.io/v1alpha1",
        "kind": "Swarm",
        "name": "example",
        "namespace": "team-a",
    }
    assert (after["seat"], after["execution_id"], after["severity"]) == ("eng-1", "exe-9", "warn")
    assert after["logger"] == "agentihooks_worker.boot" and after["timestamp"]
    with pytest.raises(ValueError, match="AGENTIHOOKS_LOG_FORMAT is text or json"):
        worker_logs.configure("yaml")


def test_worker_event_lines_carry_the_attempt_in_json_and_stay_as_the_spec_writes_them_in_text(
    stream: Err,
) -> None:
    """Issue 47: ``checkpoint_committed`` and ``restore_verified`` (printed event lines, not log
    records) lacked ``object`` and ``seat`` in the JSON format. Now they carry them after their own
    fields; in the text format the spec's line is unchanged."""
    from agentihooks_checkpoint.directive import Continuity, RestoreOutcome
    from agentihooks_worker.report import emit, event_line, restore_verified_line

    outcome = RestoreOutcome(
        execution_id="exe-9", recovery=Continuity.NATIVE, checkpoint_id="ckpt-7", session_id="s", watermark=4
    )
    worker_logs._IDENTITY.clear()
    try:
        worker_logs.configure("text")
        worker_logs.identify(swarm="example", namespace="team-a", seat="eng-1", execution_id="exe-9")
        emit(restore_verified_line(outcome))
        [text_line] = [json.loads(x) for x in stream.getvalue().splitlines() if x.startswith("{")]
        assert text_line == {
            "event": "restore_verified",
            "execution_id": "exe-9",
            "recovery": "native",
            "checkpoint_id": "ckpt-7",
            "watermark": 4,
        }
        worker_logs.configure("json")
        emit(restore_verified_line(outcome))
        emit(event_line("checkpoint_committed", execution_id="exe-9", checkpoint_id="ckpt-8", watermark=5))
        emit(event_line("restore_refused", execution_id="exe-9", reason="corrupt_object"))
        emit("not json at all")
        out = stream.getvalue().splitlines()
        verified, committed, refused = (json.loads(x) for x in out if x.startswith("{"))
        assert "not json at all" in out
    finally:
        worker_logs._IDENTITY.clear()
        worker_logs.configure("text")
    for line in (verified, committed, refused):
        assert line["object"] == {
            "apiVersion": "agentihooks.io/v1alpha1",
            "kind": "Swarm",
            "name": "example",
            "namespace": "team-a",
        }
        assert line["seat"] == "eng-1" and line["execution_id"] == "exe-9" and line["timestamp"]
    assert list(verified)[:5] == ["event", "execution_id", "recovery", "checkpoint_id", "watermark"]
    assert (committed["severity"], refused["severity"]) == ("info", "error")


def test_the_launch_line_names_the_attempt_launched_not_the_fenced_one(stream: Err) -> None:
    """Issue 47: the operator's line for a replacement's Pod carried the fenced attempt's id (the pass
    was about that one), and a first attempt's line had no execution id or seat at all."""
    from typing import Any as _Any

    from agentihooks_operator.k8s.building.pods import Owner
    from agentihooks_operator.k8s.launcher import KubernetesLauncher
    from agentihooks_operator.recovery.models import LaunchPlan
    from agentihooks_operator.swarm import SwarmSpec
    from pydantic import SecretStr

    class Kube:
        def create(self, resource: str, namespace: str, body: dict[str, _Any]) -> dict[str, _Any]:
            return body

        def get(self, resource: str, namespace: str, name: str) -> None:
            return None

    spec = SwarmSpec.model_validate(
        {
            "image": "ghcr.io/agentihooks/worker:2.1.0",
            "harness": {"name": "claude", "command": ["claude", "-p", "go"]},
            "seats": [
                {"name": "eng-1", "project": "github.com/acme/app", "task": {"id": "t-1", "text": "x"}}
            ],
        }
    )
    launcher = KubernetesLauncher(Kube(), Owner("example", "team-a", "uid-1", "op-1"), lambda: spec)  # type: ignore[arg-type]

    def plan(execution_id: str, generation: int) -> LaunchPlan:
        return LaunchPlan(
            execution_id=execution_id, seat="eng-1", generation=generation, task_id="t-1", task_generation=1,
            task_text="x", grant_id="g", worker_token=SecretStr("tok"), compatibility_key="2.1.0", epoch=1,
        )  # fmt: skip

    first, fenced, replacement = ("exe-" + c * 32 for c in "abc")
    logs.configure("json")
    with logs.about_swarm("team-a", "example", "uid-1"):
        launcher.launch(plan(first, 1))  # a new seat: no attempt context around it
        with logs.about_attempt(fenced, "eng-1"):  # the pass is about the fenced attempt
            launcher.launch(plan(replacement, 2))
    launched = [
        line
        for line in _lines(stream, "agentihooks_operator.k8s.launcher")
        if ": pod created" in line["message"]
    ]
    assert [(line["execution_id"], line["seat"]) for line in launched] == [
        (first, "eng-1"),
        (replacement, "eng-1"),
    ]
    assert all(line["object"]["name"] == "example" for line in launched)
