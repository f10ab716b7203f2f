"""Native and reconstructed restores proven with the real Claude Code and Codex CLIs, in worker processes.

Every attempt is ``agentihooks-worker boot`` as a process of its own, with a
launch record, a local checkpoint store and the real CLI from npm
(:mod:`testsupport.real_clis`: Claude Code 2.1.332, Codex 0.162.1) talking to the
loopback model API of :mod:`testsupport.model_api`. Only dummy credentials
exist in the workers' environment, which is built from nothing (no variable of
the test process reaches them).

The steps are :mod:`agentihooks_demo.realresume`'s (``make evidence`` runs them
too, in its real-harness cases); the assertions here check more than the
evidence records.

1. The first attempt is a fresh launch. Its real CLI holds a short conversation
   and writes its own session files: the prompt, the scripted reply ``ack 1``
   with a read-only tool call, the tool's result. The CLI's next request is held
   open by the model API, so the CLI is alive in the middle of its conversation
   while the worker's periodic capture commits a native checkpoint of it.
2. The attempt dies: SIGKILL to the worker, its process group, the harness's own
   process group and everything below them, as a container's OOM kill does.
3. The replacement boots with the restore directive the controller writes for
   that checkpoint (``native`` or ``reconstructed``), restores it, and its real
   CLI is started by the worker's harness adapter: ``claude --resume <id>`` or
   ``codex exec resume <id>`` (native), or the original command with
   ``continuation.txt`` on its standard input (reconstructed). The model API's
   record of that CLI's first request is what the assertions read.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import pytest
from agentihooks_checkpoint.directive import Continuity
from agentihooks_demo.realresume import (
    DUMMY_ANTHROPIC_KEY,
    DUMMY_OPENAI_KEY,
    FIRST_PROMPT,
    FIRST_REPLY,
    HARNESSES,
    SCOPE,
    SECOND_REPLY,
    Seat,
    carried_turns,
    first_attempt_and_kill,
    holds,
    js_dump,
    js_json,
    resume_natively,
    texts,
)
from agentihooks_worker.continuation import OPENING_LINE, RESUME_LINE
from agentihooks_worker.harness import harness_for
from agentihooks_worker.transcripts import count_records
from testsupport import real_clis
from testsupport.checkpoints import make_repo
from testsupport.model_api import ModelApi

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bins() -> Path:
    return real_clis.require(real_clis.PINNED)


@pytest.fixture
def api() -> Iterator[ModelApi]:
    with ModelApi() as running:
        yield running


@pytest.fixture
def seat(request: pytest.FixtureRequest, tmp_path: Path, bins: Path, api: ModelApi) -> Iterator[Seat]:
    repo = tmp_path / "project"
    make_repo(repo, dirty=False)
    s = Seat(tmp_path, request.param, bins, api, repo)
    try:
        yield s
    finally:
        s.kill_all()


def assert_private(path: Path, top: Path) -> None:
    """``path`` is 0600 and every folder from it up to ``top`` is 0700."""
    assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    for parent in path.parents:
        assert stat.S_IMODE(parent.stat().st_mode) == 0o700, parent
        if parent == top:
            break


@pytest.mark.parametrize("seat", HARNESSES, indirect=True)
def test_native_resume_sends_the_earlier_turns(seat: Seat) -> None:
    fenced = first_attempt_and_kill(seat)
    if seat.harness == "claude":
        # the real Claude Code ran the worker's capture hooks (PostToolUse after its tool call): each
        # appended a byte to the attempt's signal file, which the worker's continuous capture watches
        signal_file = seat.layout("exe-1").root / "run" / "capture.signal"
        assert signal_file.stat().st_size >= 1, "the real CLI ran none of the worker's hooks"
    result = resume_natively(seat, fenced)
    second = result.attempt
    assert result.exit_code == 0, second.output()
    # the resumed CLI finished its turn, and announced it: Claude Code's Stop hook, Codex's notify
    # program (a -c override on its command line; its config.toml untouched)
    signal_file = seat.layout("exe-2").root / "run" / "capture.signal"
    assert signal_file.stat().st_size >= 1, f"the resumed {seat.harness} announced no finished turn"
    assert result.recovery == ["native"]
    # the real CLI reopened the session: its request carries the earlier turns, byte for byte
    resumed = result.request
    assert resumed is not None, f"the resumed CLI sent nothing:\n{second.output()}"
    assert js_json(FIRST_PROMPT) in fenced.first_request.body
    assert js_json(FIRST_PROMPT) in resumed.body
    assert js_json(FIRST_REPLY) in resumed.body
    said = texts(resumed)
    prompt_at = next(i for i, (_, t) in enumerate(said) if t == FIRST_PROMPT)
    reply_at = next(i for i, (role, t) in enumerate(said) if role == "assistant" and t == FIRST_REPLY)
    resume_at = next(i for i, (role, t) in enumerate(said) if role == "user" and t.strip() == RESUME_LINE)
    assert prompt_at < reply_at < resume_at, said
    if seat.harness == "codex":
        # Codex sends the earlier user message item itself again: identical bytes, same item id
        first_user = next(i for i in fenced.first_request.json["input"] if holds(i, FIRST_PROMPT))
        assert js_dump(first_user) in fenced.first_request.body
        assert js_dump(first_user) in resumed.body
    # what make evidence records as turns_carried agrees, check by check
    checks = carried_turns(seat.harness, fenced, resumed)
    assert checks and all(checks.values()), checks
    assert ("first_user_item_identical" in checks) == (seat.harness == "codex")
    # the version the worker read from the CLI is the pinned one, and it wrote the session too
    pinned = real_clis.PINNED[real_clis.PACKAGE_OF[seat.harness]]
    assert result.harness_version == pinned
    assert fenced.written_by is not None and pinned in fenced.written_by
    # the worker started exactly the adapter's resume command
    adapter = harness_for(seat.harness)
    expected = adapter.resume_command(seat.agent(), fenced.session_id)
    assert expected == (
        [str(seat.cli), "-p", "--resume", fenced.session_id]  # print mode, as launched
        if seat.harness == "claude"
        else [str(seat.cli), "exec", "resume", fenced.session_id]
    )
    layout = seat.layout("exe-2")
    state = json.loads((layout.root / "run" / "restore.json").read_text())
    assert state["argv"] == expected
    # the session files the worker restored are private, and the CLI went on in the same session
    restored = adapter.find_session(layout.harness_home, fenced.session_id, layout.worktree)
    assert restored is not None
    for rel in fenced.session_files:
        target = adapter.restore_target(PurePosixPath(rel), layout.worktree)
        assert target is not None
        assert_private(layout.harness_home / target, layout.home)
    now = (layout.harness_home / restored.transcript).read_bytes()
    assert now.startswith(fenced.transcript)  # the same session file, continued
    assert js_json(SECOND_REPLY)[1:-1] in now
    # the replacement's own checkpoints: its first capture, then its final one of the resumed session
    mine = seat.store.list_checkpoints(SCOPE, execution_id="exe-2")
    assert [c.execution_generation for c in mine] == [2] * len(mine) and len(mine) >= 2
    assert mine[0].native and mine[0].native_session_id == fenced.session_id
    assert (
        mine[0].watermark == count_records(layout.harness_home / restored.transcript) - 1 > fenced.watermark
    )
    # no credential but the dummy ones ever reached the model API
    keys = {r.headers.get("x-api-key") or r.headers.get("Authorization") for r in seat.api.snapshot()}
    assert keys <= {DUMMY_ANTHROPIC_KEY, f"Bearer {DUMMY_OPENAI_KEY}", None}


@pytest.mark.parametrize("seat", HARNESSES, indirect=True)
def test_reconstructed_restore_opens_with_the_continuation(seat: Seat) -> None:
    fenced = first_attempt_and_kill(seat)
    seat.api.set_script([SECOND_REPLY])
    before = len(seat.api.snapshot())
    second = seat.launch("exe-2", 2, directive=fenced.directive(Continuity.RECONSTRUCTED))
    code = seat.finish(second)
    assert code == 0, second.output()
    assert [e["recovery"] for e in second.events("restore_verified")] == ["reconstructed"]
    layout = seat.layout("exe-2")
    continuation = layout.continuation
    assert_private(continuation, layout.root)
    raw = continuation.read_bytes()
    assert raw == OPENING_LINE.encode() + b"\n\n" + fenced.transcript  # the archived transcript, unchanged
    assert not list(layout.harness_home.glob("**/*" + fenced.session_id + "*.jsonl"))  # a new conversation
    turns = seat.api.conversation(before)
    assert turns, f"the CLI sent nothing:\n{second.output()}"
    first = turns[0]
    continuation_text = raw.decode()
    said = [t for _, t in texts(first)]
    holding = [t for t in said if OPENING_LINE in t]
    assert len(holding) == 1, "the first request does not carry the continuation text"
    text = holding[0]
    # The whole continuation is the first turn, opening line first: the original prompt (the
    # transcript's own first turn) is not sent again ahead of it.
    assert text.strip() == continuation_text.strip()
    assert text.startswith(f"{OPENING_LINE}\n\n{fenced.transcript.decode()}")
    assert FIRST_PROMPT not in text[: len(OPENING_LINE) + 2]
    assert js_json(OPENING_LINE)[1:-1] in first.body


@pytest.mark.parametrize("seat", HARNESSES, indirect=True)
def test_a_really_unqualified_cli_is_refused(seat: Seat) -> None:
    """The replacement's image carries a real release outside the qualified series (Claude Code 2.0.77,
    Codex 0.163.0, installed from npm): the worker asks it for its version, refuses
    ``unqualified_version`` and never starts it."""
    other = real_clis.require(real_clis.UNQUALIFIED)
    cli = real_clis.executable(other, seat.harness)
    adapter = harness_for(seat.harness)
    reported = adapter.installed_version(
        str(cli), {"PATH": os.environ.get("PATH", ""), "HOME": str(seat.tmp)}
    )
    assert str(reported) == real_clis.UNQUALIFIED[real_clis.PACKAGE_OF[seat.harness]]
    assert not adapter.is_qualified(reported)
    fenced = first_attempt_and_kill(seat)
    before = len(seat.api.snapshot())
    second = seat.launch("exe-2", 2, directive=fenced.directive(Continuity.NATIVE), cli=cli)
    assert seat.finish(second) == 64, second.output()
    assert [e["reason"] for e in second.events("restore_refused")] == ["unqualified_version"]
    assert second.events("restore_verified") == []
    assert seat.api.snapshot()[before:] == []  # the CLI never ran a turn
    layout = seat.layout("exe-2")
    assert not (layout.worktree / ".git").exists()  # native state is checked before the source is touched
    assert seat.store.list_checkpoints(SCOPE, execution_id="exe-2") == []
