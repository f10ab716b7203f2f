"""Native resume with the real Claude Code and Codex CLIs, in worker processes: the steps, shared.

``tests/integration/worker/test_real_cli_resume.py`` and ``make evidence``'s
real-harness cases (:mod:`agentihooks_demo.realcase`) run the same flow:

1. The first attempt is ``agentihooks-worker boot`` as a process of its own,
   a fresh launch with a launch record, a local checkpoint store and the real
   CLI from npm (:mod:`agentihooks_demo.realclis`) talking to the loopback
   model API (:mod:`agentihooks_demo.model_api`). The CLI holds a short
   conversation and writes its own session files: the prompt, the scripted
   reply with a read-only tool call, the tool's result. Its next request is
   held open by the model API, so the CLI is alive in the middle of its
   conversation while the worker's periodic capture commits a native
   checkpoint of the whole turn (:func:`first_attempt_and_kill`).
2. The attempt dies: SIGKILL to every process of it (the worker, the CLI and
   what they started), as a container's OOM kill does.
3. The replacement boots with the restore directive the controller writes for
   that checkpoint (:meth:`Fenced.directive`), restores it, and the worker's
   harness adapter starts the real CLI: ``claude --resume <id>`` or ``codex
   exec resume <id>`` (native), or the original command with
   ``continuation.txt`` on its standard input (reconstructed). The model API's
   record of that CLI's first request is what :func:`carried_turns` reads.

Only dummy credentials exist in the workers' environment, which is built from
nothing (no variable of the calling process reaches them). Every step that
does not turn out as described raises :class:`ResumeFailed` with the
attempt's output.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentihooks_checkpoint.directive import Continuity, RestoreDirective
from agentihooks_checkpoint.record import RECORD_SIZE_CAP, parse_record
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores import LocalStore
from agentihooks_worker.attempt import AttemptLayout
from agentihooks_worker.continuation import RESUME_LINE
from agentihooks_worker.harness import harness_for
from agentihooks_worker.transcripts import count_records

from . import realclis
from .containers import CONTAINER_ENV, container_pids, kill_container
from .model_api import HOLD, ModelApi, RecordedRequest, Reply, ToolCall

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
_MAIN = "from agentihooks_worker.cli import main; main()"


class ResumeFailed(RuntimeError):
    """A step of the flow did not turn out as it must (the message carries the attempt's output)."""


def js_json(value: str) -> bytes:
    """``value`` as both CLIs encode a JSON string (UTF-8, U+2028 unescaped, no spaces)."""
    return json.dumps(value, ensure_ascii=False).encode()


def js_dump(value: Any) -> bytes:
    """``value`` as both CLIs encode a JSON value (UTF-8 unescaped, no spaces)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def texts(request: RecordedRequest) -> list[tuple[str, str]]:
    """``(role, text)`` of every text of a request, in order (``messages`` or Responses ``input``)."""
    body = request.json
    out: list[tuple[str, str]] = []
    if not isinstance(body, dict):
        return out
    items = body.get("messages") if "messages" in body else body.get("input", [])
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        content = item.get("content")
        if isinstance(content, str):
            out.append((item.get("role", ""), content))
        elif isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and isinstance(block.get("text"), str):
                    out.append((item.get("role", ""), block["text"]))
    return out


def holds(item: Any, text: str) -> bool:
    """True for a user item of a Responses ``input`` whose content has exactly ``text``."""
    return (
        isinstance(item, dict)
        and item.get("role") == "user"
        and any(isinstance(b, dict) and b.get("text") == text for b in item.get("content", []))
    )


@dataclass
class Attempt:
    """One worker process (one "container": every process it starts carries its name), and its output."""

    execution_id: str
    container: str
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
                if isinstance(obj, dict) and obj.get("event") == name:
                    found.append(obj)
        return found

    def output(self) -> str:
        return (
            self.stdout.read_text(errors="replace")[-3000:] + self.stderr.read_text(errors="replace")[-3000:]
        )


@dataclass
class Seat:
    """A seat of one swarm: its project (a git repository with a ``README.md``), its store, its attempts."""

    tmp: Path
    harness: str
    bins: Path
    api: ModelApi
    repo: Path
    scope: StoreScope = SCOPE
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def store(self) -> LocalStore:
        return LocalStore(self.tmp / "store")

    @property
    def cli(self) -> Path:
        return realclis.executable(self.bins, self.harness)

    def layout(self, execution_id: str) -> AttemptLayout:
        return AttemptLayout(self.tmp / "attempts", execution_id, self.harness, self.scope.task_id)

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
        if node is None:
            raise ResumeFailed("the real CLIs need node, and it is not on PATH")
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
                "task_id": self.scope.task_id,
                "seat_id": "eng-1",
                "swarm_id": self.scope.swarm,
                "grant_id": f"grant-{generation}",
            },
            "harness": self.harness,
            "agent": self.agent(cli),
            "kill_seconds": 5,
            "registration": {
                "projects": [PROJECT],
                "task_generation": self.scope.task_generation,
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
        container = f"real-{self.harness}-{execution_id}-{uuid.uuid4().hex[:12]}"
        env = {**self.environment(launch_record), CONTAINER_ENV: container}
        with stdout.open("wb") as out, stderr.open("wb") as err:
            proc = subprocess.Popen(
                [*argv, "boot"],
                env=env,
                cwd=self.tmp,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,  # a container's processes: one tree, killed as one
            )
        attempt = Attempt(execution_id, container, proc, stdout, stderr)
        self.attempts.append(attempt)
        return attempt

    def kill(self, attempt: Attempt) -> None:
        """The OOM kill: SIGKILL to every process of the attempt at once (the worker and its harness)."""
        kill_container(attempt.container)
        attempt.proc.wait()
        if container_pids(attempt.container):
            kill_container(attempt.container, wait=10)

    def finish(self, attempt: Attempt, timeout: float = 300) -> int:
        """The attempt's exit code; killed and :class:`ResumeFailed` when it runs past ``timeout``."""
        try:
            return attempt.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill(attempt)
            raise ResumeFailed(f"{attempt.execution_id} did not finish:\n{attempt.output()}") from None

    def kill_all(self) -> None:
        for attempt in self.attempts:
            if attempt.proc.poll() is None or container_pids(attempt.container):
                self.kill(attempt)


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
    #: The checkpoint record's bytes as the store holds them.
    manifest: bytes
    #: The version the first attempt's worker read from its CLI (the record's ``native_harness_version``).
    written_by: str | None

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


def _check(ok: bool, message: str, attempt: Attempt) -> None:
    if not ok:
        raise ResumeFailed(f"{message}:\n{attempt.output()}")


def complete_records(data: bytes) -> int:
    """:func:`count_records` of a transcript's bytes (complete, non-empty, newline-ended records)."""
    return sum(1 for line in data.split(b"\n")[:-1] if line)


def first_attempt_and_kill(seat: Seat, timeout: float = 180) -> Fenced:
    """Attempt 1: the real CLI converses, the worker captures it natively, then the attempt is OOM-killed."""
    seat.api.set_script([Reply(FIRST_REPLY, seat.first_tool("exe-1")), HOLD])
    first = seat.launch("exe-1", 1)
    try:
        seat.api.wait_for(lambda a: any(r.held for r in a.snapshot()), timeout=timeout)
    except TimeoutError as e:  # the tool ran and its result went out, or not
        raise ResumeFailed(f"{e}:\n{first.output()}") from None
    adapter = harness_for(seat.harness)
    layout = seat.layout("exe-1")
    live = adapter.newest_session(layout.harness_home, layout.worktree)
    _check(live is not None, "the real CLI wrote no session", first)
    assert live is not None
    transcript = layout.harness_home / live.transcript
    deadline = time.monotonic() + timeout
    while True:  # the CLI waits on the held request; a periodic capture commits what it wrote
        _check(first.proc.poll() is None, "the first attempt ended early", first)
        # The session as it is now, then the checkpoints: one covering exactly these records holds
        # this very transcript (the CLI only appends, and may append more while we look).
        files = {f.as_posix(): (layout.harness_home / f).read_bytes() for f in live.files}
        records = complete_records(files[live.transcript.as_posix()])
        mine = seat.store.list_checkpoints(seat.scope, execution_id="exe-1")
        newest = mine[0] if mine else None
        if newest is not None and newest.native and newest.watermark == records - 1:
            break
        _check(time.monotonic() < deadline, "no checkpoint of the whole turn", first)
        time.sleep(0.2)
    _check(count_records(transcript) >= records, "the transcript shrank", first)
    seat.kill(first)  # the OOM kill: the worker and its harness die at once, no final capture
    _check(
        [e["when"] for e in first.events("checkpoint_committed")].count("final") == 0,
        "the killed attempt took a final capture",
        first,
    )
    _check(newest.native_session_id == live.session_id, "the checkpoint names another session", first)
    turns = seat.api.conversation()
    _check(
        len(turns) == 2 and turns[1].held,
        f"expected one answered turn and one held, the model API saw {len(turns)} turns",
        first,
    )
    first_request = turns[0]
    _check(js_json(FIRST_PROMPT) in first_request.body, "the first request lacks the prompt", first)
    # the CLI's own session format holds the turn as the model API saw it, U+2028 unescaped
    written = files[live.transcript.as_posix()]
    _check(
        js_json(FIRST_PROMPT)[1:-1] in written and js_json(FIRST_REPLY)[1:-1] in written,
        "the CLI's session file does not hold the turn byte for byte",
        first,
    )
    key, _ = seat.store.read_pointer(seat.scope, newest.checkpoint_id)
    manifest = seat.store.read_bytes(seat.scope, key, RECORD_SIZE_CAP)
    return Fenced(
        newest.checkpoint_id,
        live.session_id,
        newest.watermark,
        first_request,
        files,
        live.transcript.as_posix(),
        manifest,
        parse_record(manifest).native_harness_version,
    )


@dataclass(frozen=True)
class Resumed:
    """The replacement of a native restore, as it ran."""

    attempt: Attempt
    exit_code: int
    #: ``recovery`` of each ``restore_verified`` line it logged.
    recovery: list[str]
    #: The resumed CLI's first conversation turn as the model API received it.
    request: RecordedRequest | None
    #: ``run/restore.json``: the command the worker started, and the version it read from the CLI.
    argv: list[str]
    harness_version: str | None


def resume_natively(seat: Seat, fenced: Fenced, timeout: float = 300) -> Resumed:
    """Attempt 2: boot with the native directive for ``fenced``, let the resumed CLI run to its end."""
    seat.api.set_script([SECOND_REPLY])
    before = len(seat.api.snapshot())
    second = seat.launch("exe-2", 2, directive=fenced.directive(Continuity.NATIVE))
    code = seat.finish(second, timeout=timeout)
    turns = seat.api.conversation(before)
    state_file = seat.layout("exe-2").root / "run" / "restore.json"
    state: dict[str, Any] = json.loads(state_file.read_text()) if state_file.exists() else {}
    return Resumed(
        second,
        code,
        [str(e.get("recovery")) for e in second.events("restore_verified")],
        turns[0] if turns else None,
        [str(a) for a in state.get("argv", [])],
        state.get("harness_version"),
    )


def carried_turns(harness: str, fenced: Fenced, resumed: RecordedRequest | None) -> dict[str, bool]:
    """Whether the resumed request carried the earlier turns, each check by itself.

    * the prompt and the reply, JSON-encoded as the model API received them in
      the first attempt, are in the resumed request's bytes;
    * they come in order: the prompt, then the assistant's reply, then the
      worker's resume line as a new user turn;
    * Codex only: the first request's user item itself (same bytes, same item id).
    """
    if resumed is None:
        return {"resumed_request_seen": False}
    said = texts(resumed)

    def index(pred: Any) -> int:
        return next((i for i, (role, t) in enumerate(said) if pred(role, t)), -1)

    prompt_at = index(lambda _r, t: t == FIRST_PROMPT)
    reply_at = index(lambda r, t: r == "assistant" and t == FIRST_REPLY)
    resume_at = index(lambda r, t: r == "user" and t.strip() == RESUME_LINE)
    checks = {
        "resumed_request_seen": True,
        "prompt_bytes_as_first_sent": js_json(FIRST_PROMPT) in fenced.first_request.body
        and js_json(FIRST_PROMPT) in resumed.body,
        "reply_bytes": js_json(FIRST_REPLY) in resumed.body,
        "prompt_then_reply_then_resume_line": 0 <= prompt_at < reply_at < resume_at,
    }
    if harness == "codex":
        first_input = (
            fenced.first_request.json.get("input", []) if isinstance(fenced.first_request.json, dict) else []
        )
        item = next((i for i in first_input if holds(i, FIRST_PROMPT)), None)
        checks["first_user_item_identical"] = (
            item is not None and js_dump(item) in fenced.first_request.body and js_dump(item) in resumed.body
        )
    return checks
