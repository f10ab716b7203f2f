"""Native and reconstructed restores proven with the real Claude Code and Codex CLIs, in worker processes.

Every attempt is ``agentihooks-worker boot`` as a process of its own, with a
launch record, a local checkpoint store and the real CLI from npm
(:mod:`testsupport.real_clis`: Claude Code 2.1.332, Codex 0.162.1) talking to the
loopback model API of :mod:`testsupport.model_api`. Only dummy credentials
exist in the workers' environment, which is built from nothing (no variable of
the test process reaches them).

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
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from agentihooks_checkpoint.directive import Continuity, RestoreDirective
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores import LocalStore
from agentihooks_worker.attempt import AttemptLayout
from agentihooks_worker.continuation import OPENING_LINE, RESUME_LINE
from agentihooks_worker.harness import harness_for
from agentihooks_worker.transcripts import count_records
from testsupport import real_clis
from testsupport.checkpoints import make_repo
from testsupport.model_api import HOLD, ModelApi, RecordedRequest, Reply, ToolCall
from testsupport.processes import kill_tree

pytestmark = pytest.mark.slow

SCOPE = StoreScope(swarm="example", task_id="task-1", task_generation=1)
PROJECT = "local:fixture"
COMPATIBILITY_KEY = "agentihooks-worker:test"
#: Raw U+2028 and non-ASCII text: the CLIs write them unescaped, the worker must carry them byte for byte.
FIRST_PROMPT = "First turn: remember the word \u00abkumquat\u00bb\u2028and read README.md."
FIRST_REPLY = "ack 1: noted \u00abkumquat\u00bb"
SECOND_REPLY = "ack 2: still \u00abkumquat\u00bb"
#: The only credentials any worker here ever has.
DUMMY_ANTHROPIC_KEY = "sk-ant-dummy-key-for-the-loopback-model-api"
DUMMY_OPENAI_KEY = "sk-dummy-key-for-the-loopback-model-api"
HARNESSES = ["claude", "codex"]


def js_json(value: str) -> bytes:
    """``value`` as both CLIs encode a JSON string (UTF-8, U+2028 unescaped, no spaces)."""
    return json.dumps(value, ensure_ascii=False).encode()


@pytest.fixture(scope="module")
def bins() -> Path:
    return real_clis.require(real_clis.PINNED)


@pytest.fixture
def api() -> Iterator[ModelApi]:
    with ModelApi() as running:
        yield running


@dataclass
class Attempt:
    """One worker process, and where its output goes."""

    execution_id: str
    proc: subprocess.Popen[bytes]
    stdout: Path
    stderr: Path

    def events(self, name: str) -> list[dict[str, Any]]:
        found = []
        for line in self.stderr.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                if obj.get("event") == name:
                    found.append(obj)
        return found

    def output(self) -> str:
        return (
            self.stdout.read_text(errors="replace")[-3000:] + self.stderr.read_text(errors="replace")[-3000:]
        )


@dataclass
class Seat:
    """A seat of one swarm: its project, its checkpoint store, and the attempts that ran it."""

    tmp: Path
    harness: str
    bins: Path
    api: ModelApi
    repo: Path = field(init=False)
    attempts: list[Attempt] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.repo = self.tmp / "project"
        make_repo(self.repo, dirty=False)

    @property
    def store(self) -> LocalStore:
        return LocalStore(self.tmp / "store")

    @property
    def cli(self) -> Path:
        return real_clis.executable(self.bins, self.harness)

    def layout(self, execution_id: str) -> AttemptLayout:
        return AttemptLayout(self.tmp / "attempts", execution_id, self.harness, SCOPE.task_id)

    def agent(self, cli: Path | None = None) -> list[str]:
        exe = str(cli or self.cli)
        return [exe, "-p", FIRST_PROMPT] if self.harness == "claude" else [exe, "exec", FIRST_PROMPT]

    def first_tool(self, execution_id: str) -> ToolCall:
        """A read-only tool each CLI runs without asking: Claude Code's Read, Codex's get_goal."""
        if self.harness == "claude":
            return ToolCall("Read", {"file_path": str(self.layout(execution_id).worktree / "README.md")})
        return ToolCall("get_goal", {})

    def environment(self, launch_record: Path) -> dict[str, str]:
        """The worker's whole environment: settings, dummy provider keys, the loopback API, PATH."""
        node = shutil.which("node")
        assert node is not None, "the real CLIs need node"
        path = os.pathsep.join(dict.fromkeys([str(Path(node).parent), "/usr/local/bin", "/usr/bin", "/bin"]))
        return {
            "PATH": path,
            "HOME": str(self.tmp / "worker-home"),
            "LANG": "C.UTF-8",
            "AGENTIHOOKS_LAUNCH_RECORD": str(launch_record),
            "AGENTIHOOKS_ATTEMPTS_DIR": str(self.tmp / "attempts"),
            "AGENTIHOOKS_CHECKPOINT_ROOT": str(self.tmp / "store"),
            "AGENTIHOOKS_PROJECT_REMOTES": json.dumps({PROJECT: str(self.repo)}),
            "AGENTIHOOKS_CAPTURE_INTERVAL_SECONDS": "0.5",
            # Claude Code: the model API on loopback, no other traffic
            "ANTHROPIC_BASE_URL": self.api.base_url,
            "ANTHROPIC_API_KEY": DUMMY_ANTHROPIC_KEY,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            # Codex: the provider named in $CODEX_HOME/config.toml reads its key from here
            "OPENAI_API_KEY": DUMMY_OPENAI_KEY,
        }

    def launch(
        self,
        execution_id: str,
        generation: int,
        *,
        directive: RestoreDirective | None = None,
        cli: Path | None = None,
    ) -> Attempt:
        """Start ``agentihooks-worker boot`` for one attempt of this seat (the Pod starting)."""
        if self.harness == "codex":
            # Stands in for the provider settings the Pod gives Codex: its model provider is the loopback API.
            home = self.layout(execution_id).codex_home
            home.mkdir(mode=0o700, parents=True)
            for parent in home.parents:
                if parent == self.tmp:
                    break
                parent.chmod(0o700)
            (home / "config.toml").write_text(self.api.codex_config())
        record: dict[str, Any] = {
            "schema_version": 1,
            "authority": {
                "execution_id": execution_id,
                "generation": generation,
                "task_id": SCOPE.task_id,
                "seat_id": "eng-1",
                "swarm_id": SCOPE.swarm,
                "grant_id": f"grant-{generation}",
            },
            "harness": self.harness,
            "agent": self.agent(cli),
            "kill_seconds": 5,
            "registration": {
                "projects": [PROJECT],
                "task_generation": SCOPE.task_generation,
                "compatibility_key": COMPATIBILITY_KEY,
            },
        }
        if directive is not None:
            record["restore"] = directive.model_dump(mode="json", exclude_none=True)
            record["restore_from"] = {"execution_id": "exe-1", "execution_generation": 1}
        launch_record = self.tmp / f"launch-{execution_id}.json"
        launch_record.write_text(json.dumps(record))
        stdout, stderr = self.tmp / f"{execution_id}.out", self.tmp / f"{execution_id}.err"
        entry = Path(sys.executable).parent / "agentihooks-worker"
        argv = [str(entry)] if entry.exists() else [sys.executable, "-c", _MAIN]
        with stdout.open("wb") as out, stderr.open("wb") as err:
            proc = subprocess.Popen(
                [*argv, "boot"],
                env=self.environment(launch_record),
                cwd=self.tmp,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,  # a container's processes: one tree, killed as one
            )
        attempt = Attempt(execution_id, proc, stdout, stderr)
        self.attempts.append(attempt)
        return attempt

    def finish(self, attempt: Attempt, timeout: float = 300) -> int:
        try:
            return attempt.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(attempt.proc.pid)
            attempt.proc.wait()
            pytest.fail(f"{attempt.execution_id} did not finish:\n{attempt.output()}")

    def kill_all(self) -> None:
        for attempt in self.attempts:
            if attempt.proc.poll() is None:
                kill_tree(attempt.proc.pid)
                attempt.proc.wait()


@dataclass(frozen=True)
class Fenced:
    """What the first attempt left: its last checkpoint and the model API's record of its first turn."""

    checkpoint_id: str
    session_id: str
    watermark: int
    first_request: RecordedRequest
    #: The session files the CLI wrote, relative to its harness home, with their bytes at the kill.
    session_files: dict[str, bytes]
    #: The session's transcript file's name among them.
    transcript_name: str

    @property
    def transcript(self) -> bytes:
        return self.session_files[self.transcript_name]

    def directive(self, recovery: Continuity) -> RestoreDirective:
        """The directive the controller writes when it accepts a decision for this checkpoint."""
        native = recovery is Continuity.NATIVE
        return RestoreDirective(
            checkpoint_id=self.checkpoint_id,
            recovery=recovery,
            session_id=self.session_id if native else None,
            watermark=self.watermark,
        )


@pytest.fixture
def seat(request: pytest.FixtureRequest, tmp_path: Path, bins: Path, api: ModelApi) -> Iterator[Seat]:
    s = Seat(tmp_path, request.param, bins, api)
    try:
        yield s
    finally:
        s.kill_all()


def run_first_attempt_and_kill_it(seat: Seat) -> Fenced:
    """Attempt 1: the real CLI converses, the worker captures it natively, then the attempt is OOM-killed."""
    seat.api.set_script([Reply(FIRST_REPLY, seat.first_tool("exe-1")), HOLD])
    first = seat.launch("exe-1", 1)
    seat.api.wait_for(lambda a: any(r.held for r in a.snapshot()))  # the tool ran; its result went out
    adapter = harness_for(seat.harness)
    layout = seat.layout("exe-1")
    live = adapter.newest_session(layout.harness_home, layout.worktree)
    assert live is not None, f"the real CLI wrote no session:\n{first.output()}"
    transcript = layout.harness_home / live.transcript
    deadline = time.monotonic() + 180
    while True:  # the CLI waits on the held request; a periodic capture commits what it wrote
        assert first.proc.poll() is None, f"the first attempt ended early:\n{first.output()}"
        records = count_records(transcript)
        mine = seat.store.list_checkpoints(SCOPE, execution_id="exe-1")
        newest = mine[0] if mine else None
        if newest is not None and newest.native and newest.watermark == records - 1:
            break
        assert time.monotonic() < deadline, f"no checkpoint of the whole turn:\n{first.output()}"
        time.sleep(0.2)
    files = {f.as_posix(): (layout.harness_home / f).read_bytes() for f in live.files}
    kill_tree(first.proc.pid)  # the OOM kill: the worker and its harness die at once, no final capture
    first.proc.wait()
    assert [e["when"] for e in first.events("checkpoint_committed")].count("final") == 0
    assert newest.native_session_id == live.session_id
    turns = seat.api.conversation()
    assert len(turns) == 2 and turns[1].held  # the first turn was answered, the next one never was
    first_request = turns[0]
    assert js_json(FIRST_PROMPT) in first_request.body
    # the CLI's own session format holds the turn as the model API saw it, U+2028 unescaped
    written = files[live.transcript.as_posix()]
    assert js_json(FIRST_PROMPT)[1:-1] in written and js_json(FIRST_REPLY)[1:-1] in written
    return Fenced(
        newest.checkpoint_id,
        live.session_id,
        newest.watermark,
        first_request,
        files,
        live.transcript.as_posix(),
    )


def texts(request: RecordedRequest) -> list[tuple[str, str]]:
    """``(role, text)`` of every text of a request, in order (``messages`` or Responses ``input``)."""
    body = request.json
    out: list[tuple[str, str]] = []
    items = body.get("messages") if "messages" in body else body.get("input", [])
    for item in items:
        content = item.get("content")
        if isinstance(content, str):
            out.append((item.get("role", ""), content))
        elif isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and isinstance(block.get("text"), str):
                    out.append((item.get("role", ""), block["text"]))
    return out


def assert_private(path: Path, top: Path) -> None:
    """``path`` is 0600 and every folder from it up to ``top`` is 0700."""
    assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    for parent in path.parents:
        assert stat.S_IMODE(parent.stat().st_mode) == 0o700, parent
        if parent == top:
            break


@pytest.mark.parametrize("seat", HARNESSES, indirect=True)
def test_native_resume_sends_the_earlier_turns(seat: Seat) -> None:
    fenced = run_first_attempt_and_kill_it(seat)
    seat.api.set_script([SECOND_REPLY])
    before = len(seat.api.snapshot())
    second = seat.launch("exe-2", 2, directive=fenced.directive(Continuity.NATIVE))
    code = seat.finish(second)
    assert code == 0, second.output()
    assert [e["recovery"] for e in second.events("restore_verified")] == ["native"]
    # the real CLI reopened the session: its request carries the earlier turns, byte for byte
    turns = seat.api.conversation(before)
    assert turns, f"the resumed CLI sent nothing:\n{second.output()}"
    resumed = turns[0]
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
        first_user = next(i for i in fenced.first_request.json["input"] if _holds(i, FIRST_PROMPT))
        assert _js_dump(first_user) in fenced.first_request.body
        assert _js_dump(first_user) in resumed.body
    # the worker started exactly the adapter's resume command
    adapter = harness_for(seat.harness)
    expected = adapter.resume_command(seat.agent(), fenced.session_id)
    assert expected == (
        [str(seat.cli), "--resume", fenced.session_id]
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


def _holds(item: dict[str, Any], text: str) -> bool:
    return item.get("role") == "user" and any(
        isinstance(b, dict) and b.get("text") == text for b in item.get("content", [])
    )


def _js_dump(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


@pytest.mark.parametrize("seat", HARNESSES, indirect=True)
def test_reconstructed_restore_opens_with_the_continuation(seat: Seat) -> None:
    fenced = run_first_attempt_and_kill_it(seat)
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
    # The whole continuation arrives, opening line first. Both CLIs put the original command's own prompt
    # before piped input: Claude Code joins them with a newline, Codex wraps the input in a <stdin> block.
    if seat.harness == "claude":
        assert text == f"{FIRST_PROMPT}\n{continuation_text}"
    else:
        assert text == f"{FIRST_PROMPT}\n\n<stdin>\n{continuation_text}</stdin>"
    assert text[text.index(OPENING_LINE) :].startswith(f"{OPENING_LINE}\n\n{fenced.transcript.decode()}")
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
    fenced = run_first_attempt_and_kill_it(seat)
    before = len(seat.api.snapshot())
    second = seat.launch("exe-2", 2, directive=fenced.directive(Continuity.NATIVE), cli=cli)
    assert seat.finish(second) == 64, second.output()
    assert [e["reason"] for e in second.events("restore_refused")] == ["unqualified_version"]
    assert second.events("restore_verified") == []
    assert seat.api.snapshot()[before:] == []  # the CLI never ran a turn
    layout = seat.layout("exe-2")
    assert not (layout.worktree / ".git").exists()  # native state is checked before the source is touched
    assert seat.store.list_checkpoints(SCOPE, execution_id="exe-2") == []


_MAIN = "from agentihooks_worker.cli import main; main()"
