"""schemathesis against the live control API, with every check, every phase and every kind of caller.

One ``schemathesis run`` per caller — the operator's token, a master's, a live worker's credential and
no token — with all checks (server errors, status codes, content types, response schemas and headers,
negative data rejection, positive data acceptance, missing headers, undeclared methods and their
``Allow``, authentication, use after free, resource availability) and all phases: the document's
examples, the coverage phase (boundary and negative values, undeclared methods), fuzzing, and the
stateful phase that follows the document's links (status → seats' checkpoints, events, ledger,
restore-request → restore-decision, held recoveries → token → resume).

The run is derandomized (``deterministic`` with a fixed seed) so every run sends the same requests
and a failure reproduces; ``MAX_EXAMPLES`` bounds it to a couple of minutes on two cores. Path
parameters are pinned to names that exist, so requests reach the routes' logic; a background thread
keeps the swarms' leases, as the operator's recovery loop does, so no answer is a 503.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from testsupport.control_api import MASTER_A, World, make_world

#: Examples per operation and phase for each caller (four callers): a few hundred requests per
#: operation in all (every caller), the whole module in about two minutes on two idle cores.
MAX_EXAMPLES = 80
SEED = 20261117
ROLES = ["operator", "master", "worker", "none"]
#: Rules a schema cannot express, so a schema-valid request may still be refused with 400: an
#: upload's bytes must hash to its key (``digest_mismatch``), a manifest must be a checkpoint record
#: of this execution (``invalid_record``), a pointer must name a manifest written before
#: (``invalid_pointer``), and ``mode=once`` is for pointers only (``invalid_mode``).
POSITIVE = ["2xx", "401", "403", "404", "409"]
CROSS_FIELD = [("PUT", "/v1/executions/{execution}/checkpoint-store/object", [*POSITIVE, "400"])]


@pytest.fixture(scope="module")
def live(redis_server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:  # type: ignore[no-untyped-def]
    if redis_server.proc is None:
        redis_server.start()
    flusher = redis.Redis.from_url(redis_server.url)
    flusher.flushall()  # this module's world is its own; earlier tests leave keys behind
    flusher.close()
    with make_world(redis_server.url, tmp_path_factory.mktemp("contract")) as w:
        eid = w.fail()
        w.checkpoint(eid)
        stop = threading.Event()

        def keep_leases() -> None:
            while not stop.wait(2.0):
                for recovery in w.recoveries.values():
                    recovery.acquire()

        keeper = threading.Thread(target=keep_leases, name="lease-keeper", daemon=True)
        keeper.start()
        try:
            yield w
        finally:
            stop.set()
            keeper.join(10)


def token_of(w: World, role: str) -> str | None:
    if role == "operator":
        return w.tokens["operator"]
    if role == "master":
        return w.tokens[MASTER_A]
    if role == "worker":
        return w.worker_token(w.first["swarm-b"].execution_id)
    return None


def parameters(w: World, role: str) -> dict[str, Any]:
    """Names that exist, for the path and the worker's scope; the coverage phase still varies them."""
    if role == "worker":
        plan = w.first["swarm-b"]
        return {
            "path.execution": plan.execution_id,
            "query.swarm": "swarm-b",
            "query.task_id": "task-1",
            "query.task_generation": "1",
        }
    fenced = w.recoveries["swarm-a"].awaiting_execution("eng-1") or w.first["swarm-a"].execution_id
    return {"path.swarm": "swarm-a", "path.seat": "eng-1", "path.execution": fenced}


def toml_value(value: Any) -> str:
    return json.dumps(value)


def config(w: World, role: str, report: Path) -> str:
    lines = [
        f"seed = {SEED}",
        "workers = 1",
        "max-stream-events = 1",
        "request-timeout = 60",  # generous: a loaded machine is slow, not wrong
        "continue-on-failure = true",
        "[generation]",
        f"max-examples = {MAX_EXAMPLES}",
        "deterministic = true",
        "[checks]",
        "enabled = true",
        "[reports.ndjson]",
        "enabled = true",
        f"path = {toml_value(str(report))}",
        "[parameters]",
        *(f"{toml_value(k)} = {toml_value(v)}" for k, v in parameters(w, role).items()),
    ]
    token = token_of(w, role)
    if token is not None:
        lines += ["[headers]", f"Authorization = {toml_value('Bearer ' + token)}"]
    for method, path, statuses in CROSS_FIELD:
        lines += [
            "[[operations]]",
            f"include-path = {toml_value(path)}",
            f"include-method = {toml_value(method)}",
            f"checks.positive_data_acceptance.expected-statuses = {toml_value(statuses)}",
        ]
    return "\n".join(lines) + "\n"


def failures(report: Path) -> list[str]:
    found = []
    for line in report.read_text().splitlines():
        event = json.loads(line)
        text = json.dumps(event)
        if '"code": "ST' in text or '"Failure"' in text:
            found.append(text[:2000])
    return found


@pytest.mark.parametrize("role", ROLES)
def test_schemathesis_run_is_clean(live: World, role: str, tmp_path: Path) -> None:
    report = tmp_path / "events.ndjson"
    cfg = tmp_path / "schemathesis.toml"
    cfg.write_text(config(live, role, report))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "schemathesis.cli",
            "--config-file",
            str(cfg),
            "--no-color",
            "run",
            f"{live.url}/v1/openapi.json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    summary = run.stdout[-6000:]
    print(f"schemathesis as {role}:\n{summary}")  # shown with -s, and in the report of a failure
    assert run.returncode == 0, f"schemathesis as {role}:\n{summary}\n{run.stderr[-3000:]}"
    assert "0 failures" in summary or "failures" not in summary.split("SUMMARY")[-1], summary
