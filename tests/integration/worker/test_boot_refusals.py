"""Every refusal of the spec's table from a real scenario: the launch stops with its reason, exit 64.

A refused launch never runs the harness, never logs ``restore_verified``,
never commits a checkpoint of its own, counts ``refused/<reason>``, and
(except for a source refusal) leaves the worktree byte for byte as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from agentihooks_checkpoint.layout import object_key
from agentihooks_checkpoint.reasons import NO_STORE_MESSAGE, Reason
from agentihooks_checkpoint.stores import LocalStore, S3Store
from agentihooks_worker.errors import EXIT_REFUSED
from testsupport.checkpoints import edit_record, run_git, store_path

from .conftest import NEW_EXECUTION, SCOPE, Scenario, ScenarioFactory, events, harness_runs, tree_snapshot


def put_raw(sc: Scenario, key: str, data: bytes | None) -> None:
    """Overwrite (or delete, with ``None``) a stored object behind the store's back."""
    if isinstance(sc.store, LocalStore):
        path = store_path(sc.store, SCOPE, key)
        if data is None:
            path.unlink()
        else:
            path.write_bytes(data)
        return
    assert isinstance(sc.store, S3Store)
    full = f"{sc.store.prefix}{SCOPE.prefix}{key}"
    if data is None:
        sc.store.client.delete_object(Bucket=sc.store.bucket, Key=full)
    else:
        sc.store.client.put_object(Bucket=sc.store.bucket, Key=full, Body=data)


def obj_key(sc: Scenario, role: str) -> str:
    return object_key(sc.built.record.artifact_hashes[role])


def edit(change: Callable[[dict[str, Any]], None]) -> Callable[[Scenario], None]:
    return lambda sc: edit_record(sc.store, SCOPE, "ckpt-7", change)


def flip(sc: Scenario, role: str) -> None:
    data = bytearray(sc.store.read_bytes(SCOPE, obj_key(sc, role), 1 << 30))
    data[len(data) // 2] ^= 0x01
    put_raw(sc, obj_key(sc, role), bytes(data))


def drop_transcript(r: dict[str, Any]) -> None:
    del r["artifact_hashes"]["transcript"]
    r["artifacts"] = [a for a in r["artifacts"] if a["role"] != "transcript"]


def disagree(r: dict[str, Any]) -> None:
    r["artifacts"][0]["digest"] = "sha256:" + "0" * 64


def launch_change(path: str, value: Any) -> Callable[[Scenario], None]:
    def apply(sc: Scenario) -> None:
        target = sc.launch
        *parents, last = path.split(".")
        for p in parents:
            target = target[p]
        target[last] = value

    return apply


def no_store(sc: Scenario) -> None:
    sc.settings = sc.settings.model_copy(update={"checkpoint_root": None, "checkpoint_bucket": None})


def environ(**values: str) -> Callable[[Scenario], None]:
    return lambda sc: sc.environ.update(values)


def bucket_unreachable(sc: Scenario) -> None:
    """The bucket's endpoint refuses connections (nothing listens on the discard port)."""
    sc.settings = sc.settings.model_copy(update={"checkpoint_endpoint": "http://127.0.0.1:9"})


CASES: list[tuple[str, str, dict[str, Any], Callable[[Scenario], None], str]] = [
    ("manifest_absent", "claude", {"s3": True}, launch_change("restore.checkpoint_id", "ckpt-404"), "native"),
    (
        "corrupt_manifest",
        "claude",
        {"s3": True},
        lambda sc: put_raw(sc, sc.store.read_pointer(SCOPE, "ckpt-7")[0], b'{"schema_version": "2.2"}'),
        "native",
    ),
    (
        "missing_object",
        "claude",
        {"s3": True},
        lambda sc: put_raw(sc, obj_key(sc, "git_bundle"), None),
        "native",
    ),
    ("corrupt_object", "claude", {}, lambda sc: flip(sc, "native_session"), "native"),
    ("corrupt_object", "context", {"s3": True}, lambda sc: flip(sc, "transcript"), "reconstructed"),
    ("unsupported_version", "claude", {"s3": True}, edit(lambda r: r.update(schema_version="3.0")), "native"),
    ("invalid_record", "claude", {}, edit(lambda r: r.pop("branch_name")), "native"),
    ("not_committed", "claude", {}, edit(lambda r: r.update(status="uploading")), "native"),
    ("missing_material", "context", {}, edit(drop_transcript), "reconstructed"),
    ("missing_watermark", "claude", {}, edit(lambda r: r.update(transcript_durable_cursor=None)), "native"),
    ("inventory_mismatch", "claude", {"s3": True}, edit(disagree), "native"),
    ("scope_mismatch", "claude", {}, launch_change("restore_from.execution_generation", 3), "native"),
    (
        "scope_mismatch",
        "context",
        {},
        launch_change("registration.projects", ["local:other"]),
        "reconstructed",
    ),
    ("identity_mismatch", "claude", {}, launch_change("restore_from.execution_id", "exe-other"), "native"),
    ("context_only", "context", {}, launch_change("restore.session_id", "sess-1"), "native"),
    ("conversation_mismatch", "claude", {}, launch_change("restore.session_id", "sess-other"), "native"),
    ("conversation_mismatch", "codex", {}, launch_change("restore.session_id", "sess-other"), "native"),
    ("unqualified_version", "claude", {}, environ(FAKE_CLAUDE_VERSION="2.2.0 (Claude Code)"), "native"),
    ("unqualified_version", "codex", {}, environ(FAKE_CODEX_VERSION="codex-cli 0.171.0"), "native"),
    ("version_changed", "claude", {"harness_version": "2.1.295"}, lambda sc: None, "native"),
    ("version_changed", "codex", {"harness_version": "0.162.0"}, lambda sc: None, "native"),
    ("no_checkpoint_store", "claude", {}, no_store, "native"),
    ("store_unreachable", "claude", {"s3": True}, bucket_unreachable, "native"),
    (
        "malformed_directive",
        "claude",
        {},
        launch_change("restore", {"recovery": "fresh", "checkpoint_id": "c"}),
        "",
    ),
]


def prepopulate(sc: Scenario) -> None:
    """A worktree with a checkout at the base commit and local files, as a prepared checkout would be."""
    wt = sc.layout.worktree
    wt.parent.mkdir(parents=True)
    run_git(wt.parent, "clone", "-q", str(sc.built.worktree), wt.name)
    run_git(wt, "checkout", "-q", sc.built.base_commit)
    (wt / "scratch.txt").write_bytes("local \u2028 state\n".encode())


@pytest.mark.parametrize(
    ("reason", "kind", "opts", "make_bad", "recovery"),
    CASES,
    ids=[f"{c[0]}-{c[1]}{'-s3' if c[2].get('s3') else ''}" for c in CASES],
)
def test_refusal(
    scenario: ScenarioFactory,
    capsys: pytest.CaptureFixture[str],
    reason: str,
    kind: str,
    opts: dict[str, Any],
    make_bad: Callable[[Scenario], None],
    recovery: str,
) -> None:
    sc = scenario(kind, recovery or "native", **opts)
    make_bad(sc)
    prepopulate(sc)
    before = tree_snapshot(sc.layout.worktree)
    boot = sc.boot()
    assert boot.run() == EXIT_REFUSED
    err = capsys.readouterr().err
    refused = events(err, "restore_refused")
    # the line names the spec's string; the metric keeps the short token
    assert len(refused) == 1 and refused[0]["reason"] == (
        NO_STORE_MESSAGE if reason == "no_checkpoint_store" else reason
    )
    if reason == "no_checkpoint_store":
        assert refused[0]["message"] == NO_STORE_MESSAGE
    elif reason == "malformed_directive":
        assert refused[0]["message"].startswith("malformed restore directive")
    else:
        assert refused[0]["message"] == Reason(reason).value
    assert events(err, "restore_verified") == []
    assert harness_runs(sc.tmp) == []
    assert sc.store.list_checkpoints(SCOPE, execution_id=NEW_EXECUTION) == []
    assert tree_snapshot(sc.layout.worktree) == before
    assert boot.restorer.metrics.snapshot() == {"restore_outcomes_by_type": {f"refused/{reason}": 1}}


def test_source_refusals(scenario: ScenarioFactory, capsys: pytest.CaptureFixture[str]) -> None:
    sc = scenario("claude", "native")
    sc.layout.worktree.mkdir(parents=True)
    (sc.layout.worktree / "stray.txt").write_text("not a repository\n")
    boot = sc.boot()
    assert boot.run() == EXIT_REFUSED
    refused = events(capsys.readouterr().err, "restore_refused")
    assert refused[0]["reason"] == "source: the worktree has files but no git repository"  # the spec's string
    assert refused[0]["message"] == "source: the worktree has files but no git repository"
    assert boot.restorer.metrics.snapshot() == {"restore_outcomes_by_type": {"refused/source": 1}}
    assert harness_runs(sc.tmp) == []


def test_source_refused_when_no_repository_can_be_cloned(
    scenario: ScenarioFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    sc = scenario("claude", "reconstructed")
    sc.settings = sc.settings.model_copy(update={"project_remotes": {}})
    assert sc.boot().run() == EXIT_REFUSED
    refused = events(capsys.readouterr().err, "restore_refused")
    # the bundle holds only the task's commits: it cannot be cloned without the project
    assert refused[0]["message"] == "source: cloning the project failed"


def test_every_reason_of_the_table_has_a_scenario() -> None:
    """Each case above asserts its own reason, so covering the table here means producing it there."""
    table = {r.value for r in Reason} | {"source", "no_checkpoint_store"}
    covered = {case[0] for case in CASES} | {"source"}
    assert table <= covered, f"no scenario for: {sorted(table - covered)}"
