"""A loopback model API for the real Claude Code and Codex CLIs: scripted streamed replies; requests kept.

Used by the tests (through ``testsupport.model_api``) and by ``make evidence``'s real-harness cases.

``ModelApi`` is an aiohttp server on 127.0.0.1 (a free port) in its own thread
and event loop, so synchronous tests, and the CLIs in their own processes, use it
while it runs. It answers:

* ``POST /v1/messages`` (Claude Code; Anthropic Messages API): with
  ``"stream": true`` a server-sent event stream — ``message_start``,
  ``content_block_start``, ``ping``, ``content_block_delta`` (``text_delta``;
  ``input_json_delta`` for a tool call), ``content_block_stop``,
  ``message_delta`` with ``stop_reason`` (``end_turn``, or ``tool_use``) and
  usage, ``message_stop``; without it one ``message`` object;
* ``POST /v1/messages/count_tokens``: ``{"input_tokens": N}``;
* ``POST /v1/responses`` (Codex; OpenAI Responses API): with ``"stream": true``
  the Responses events — ``response.created``, ``response.in_progress``,
  ``response.output_item.added``, ``response.content_part.added``,
  ``response.output_text.delta``, ``response.output_text.done``,
  ``response.content_part.done``, ``response.output_item.done`` (and the
  ``function_call`` item's ``response.function_call_arguments.*`` events),
  ``response.completed`` with usage; without it one ``response`` object;
* ``GET /v1/models``: an empty list; ``HEAD``/``GET`` of anything else
  (Claude Code's ``/api/hello`` reachability probe) and any other request: ``{}``.

Replies are scripted: ``ModelApi(["ack 1", "ack 2"])`` answers the first turn of
a conversation with ``ack 1`` and the next with ``ack 2``; past the script it
answers ``ack <n>``. An entry may be a :class:`Reply` (text, then a
:class:`ToolCall`) or :data:`HOLD` (the request is kept open, unanswered, until
the API stops). A *side request* — one that is not a turn of the agent's
conversation (see :meth:`ModelApi.is_side_request`) — gets :data:`SIDE_REPLY`
and does not use up the script.

Every request is recorded (:attr:`ModelApi.requests`): method, path, headers,
the raw body bytes exactly as received, the parsed JSON, and what was answered.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

#: What a side request is answered with (it never takes a scripted reply).
SIDE_REPLY = "side reply"
#: The header naming the attempt that sent a request (the worker has its harness add it).
ATTEMPT_HEADER = "X-Agentihooks-Execution"


@dataclass(frozen=True)
class ToolCall:
    """A tool the reply asks the CLI to run (``tool_use`` for Claude Code, ``function_call`` for Codex)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Reply:
    """One scripted reply: its text, and optionally a tool call after the text."""

    text: str
    tool: ToolCall | None = None
    #: Seconds the model "thinks" before it answers (a real model takes seconds per turn).
    delay: float = 0.0


class Hold:
    """A scripted entry that never answers: the request stays open until the API stops.

    A CLI waiting on a held request is alive in the middle of its conversation,
    with every earlier turn already in its session files.
    """

    def __repr__(self) -> str:
        return "HOLD"


HOLD = Hold()


@dataclass(frozen=True)
class Flood:
    """A scripted entry held until ``release`` is set, then answered with text that never ends.

    The reply streams ``megabytes`` of text deltas (1 MiB each) and no stop: a CLI that keeps what it
    receives grows until its container's memory limit, so the kernel's memory cgroup kills it. A test
    releases it once what it needs from the attempt (a committed checkpoint) is there.
    """

    release: threading.Event
    megabytes: int = 4096


ScriptEntry = str | Reply | Hold | Flood


@dataclass
class RecordedRequest:
    """One request as the model API received it."""

    method: str
    path: str
    headers: dict[str, str]
    #: The body's bytes exactly as they arrived.
    body: bytes
    json: Any
    #: ``conversation`` (took a script entry), ``side`` or ``other``.
    role: str = "other"
    #: What was answered: the reply (``None`` for a held or an ``other`` request).
    reply: Reply | None = None
    held: bool = False

    #: When it arrived (this process's monotonic clock): the order of requests across attempts.
    at: float = 0.0
    #: When it arrived on the wall clock (seconds), to compare with the controller's times.
    wall: float = 0.0
    #: When its answer was sent in full (monotonic; ``None`` while unanswered or cut off).
    answered: float | None = None

    @property
    def text(self) -> str:
        """The body as text (UTF-8)."""
        return self.body.decode("utf-8", "replace")

    @property
    def attempt(self) -> str | None:
        """The execution id of the attempt that sent it: the ``X-Agentihooks-Execution`` header the worker
        has its harness send (Claude Code's ``ANTHROPIC_CUSTOM_HEADERS``, Codex's ``env_http_headers``)."""
        for name, value in self.headers.items():
            if name.lower() == ATTEMPT_HEADER.lower():
                return value
        return None


def overlaps(requests: Sequence[RecordedRequest], successor_of: dict[str, str]) -> list[str]:
    """The one-live-agent invariant over recorded requests: no request from an attempt after the first
    request of its seat's next attempt (``successor_of``: fenced attempt → its replacement). Returns
    one line per violation (empty when it holds)."""
    first: dict[str, float] = {}
    for r in requests:
        if r.attempt is not None:
            first.setdefault(r.attempt, r.at)
    out = []
    for old, new in successor_of.items():
        if new not in first:
            continue
        late = [r.at for r in requests if r.attempt == old and r.at >= first[new]]
        if late:
            out.append(f"{old} sent {len(late)} request(s) after its successor {new}'s first")
    return out


@dataclass
class ModelApi:
    """The scripted model API; a context manager (or call :meth:`start` and :meth:`stop`)."""

    script: Sequence[ScriptEntry] = ()
    host: str = "127.0.0.1"
    port: int = 0
    requests: list[RecordedRequest] = field(default_factory=list)
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _runner: web.AppRunner | None = None
    _stopping: asyncio.Event | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _turns: int = 0

    # -- life cycle ---------------------------------------------------------------------------------

    def start(self) -> ModelApi:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="model-api", daemon=True)
        self._thread.start()
        started: Future[int] = asyncio.run_coroutine_threadsafe(self._start(), loop)
        self.port = started.result(timeout=30)
        return self

    async def _start(self) -> int:
        self._stopping = asyncio.Event()
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        addresses = self._runner.addresses
        return int(addresses[0][1])

    def stop(self) -> None:
        loop = self._loop
        if loop is None:
            return
        if self._stopping is not None:
            loop.call_soon_threadsafe(self._stopping.set)  # held requests answer now
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), loop).result(timeout=60)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=30)
        loop.close()
        self._loop = None

    def __enter__(self) -> ModelApi:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what tests use -----------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``: Claude Code's ``ANTHROPIC_BASE_URL``."""
        return f"http://{self.host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: a Codex model provider's ``base_url``."""
        return f"{self.base_url}/v1"

    def codex_config(self, model: str = "gpt-5-codex") -> str:
        """A ``$CODEX_HOME/config.toml`` that sends Codex here, authenticated by ``OPENAI_API_KEY``."""
        return (
            f'model = "{model}"\n'
            'model_provider = "loopback"\n'
            "\n"
            "[model_providers.loopback]\n"
            'name = "loopback model API"\n'
            f'base_url = "{self.openai_base_url}"\n'
            'env_key = "OPENAI_API_KEY"\n'
            'wire_api = "responses"\n'
            'env_http_headers = { "X-Agentihooks-Execution" = "AGENTIHOOKS_EXECUTION_ID" }\n'
            "request_max_retries = 0\n"
            "stream_max_retries = 0\n"
        )

    def set_script(self, script: Sequence[ScriptEntry]) -> None:
        """Replace the script; the next conversation turn takes its first entry."""
        with self._lock:
            self.script = list(script)
            self._turns = 0

    def snapshot(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self.requests)

    def conversation(self, since: int = 0) -> list[RecordedRequest]:
        """The conversation turns received (requests that took a script entry), from index ``since``."""
        return [r for r in self.snapshot()[since:] if r.role == "conversation"]

    def wait_for(self, predicate: Callable[[ModelApi], bool], timeout: float = 180) -> None:
        """Poll until ``predicate(self)`` holds (the CLIs run in other processes)."""
        deadline = time.monotonic() + timeout
        while not predicate(self):
            if time.monotonic() > deadline:
                seen = [(r.method, r.path, r.role) for r in self.snapshot()]
                raise TimeoutError(f"the model API did not see the expected requests; it saw {seen}")
            time.sleep(0.05)

    @staticmethod
    def is_side_request(path: str, body: Any) -> bool:
        """True for a request that is not a turn of the agent's conversation.

        Claude Code may send small requests of its own beside its turns (a quota
        probe asking for one token, a title or topic request without tools);
        every agent turn of Claude Code offers its ``tools``. Every request Codex
        posts to ``/v1/responses`` is a turn.
        """
        if not isinstance(body, dict):
            return True
        if path.endswith("/responses"):
            return False
        if body.get("max_tokens") == 1:
            return True
        return not body.get("tools")

    # -- serving ------------------------------------------------------------------------------------

    def _take(self) -> ScriptEntry:
        with self._lock:
            self._turns += 1
            n = self._turns
            return self.script[n - 1] if n <= len(self.script) else f"ack {n}"

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        rec = RecordedRequest(
            request.method,
            request.path,
            dict(request.headers),
            raw,
            body,
            at=time.monotonic(),
            wall=time.time(),
        )
        with self._lock:
            self.requests.append(rec)
        path = request.path.rstrip("/")
        if request.method == "POST" and path.endswith("/messages/count_tokens"):
            return web.json_response({"input_tokens": max(1, len(raw) // 4)})
        wire = (
            "anthropic"
            if path.endswith("/messages")
            else "responses"
            if path.endswith("/responses")
            else None
        )
        if request.method != "POST" or wire is None:
            if request.method == "GET" and path.endswith("/models"):
                return web.json_response({"object": "list", "data": [], "models": []})
            return web.json_response({})
        entry: ScriptEntry
        if self.is_side_request(path, body):
            rec.role, entry = "side", Reply(SIDE_REPLY)
        else:
            rec.role, entry = "conversation", self._take()
        if isinstance(entry, Hold):
            rec.held = True
            assert self._stopping is not None
            await self._stopping.wait()
            return web.json_response({"error": {"message": "the model API stopped"}}, status=503)
        if isinstance(entry, Flood):
            return await self._flood(request, rec, entry, wire)
        reply = Reply(entry) if isinstance(entry, str) else entry
        if reply.delay > 0:
            await asyncio.sleep(reply.delay)
        rec.reply = reply
        stream = isinstance(body, dict) and bool(body.get("stream"))
        model = str(body.get("model", "loopback")) if isinstance(body, dict) else "loopback"
        in_tokens = max(1, len(raw) // 4)
        if wire == "anthropic":
            message, events = _anthropic(reply, model, in_tokens)
        else:
            message, events = _responses(reply, model, in_tokens)
        if not stream:
            rec.answered = time.monotonic()
            return web.json_response(message)
        resp = web.StreamResponse(
            status=200,
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "request-id": f"req_{uuid.uuid4().hex[:24]}",
                "x-request-id": f"req_{uuid.uuid4().hex[:24]}",
            },
        )
        await resp.prepare(request)
        for name, data in events:
            await resp.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        await resp.write_eof()
        rec.answered = time.monotonic()
        return resp

    async def _flood(
        self, request: web.Request, rec: RecordedRequest, flood: Flood, wire: str
    ) -> web.StreamResponse:
        rec.held = True
        assert self._stopping is not None
        while not flood.release.is_set() and not self._stopping.is_set():  # noqa: ASYNC110
            await asyncio.sleep(0.05)  # a threading.Event, set from the test's thread
        rec.held = False
        resp = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        opening, delta = _flood_events(wire)
        chunk = "x" * (1024 * 1024 - 1) + " "
        try:
            for name, data in opening:
                await resp.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            for _ in range(flood.megabytes):
                if self._stopping.is_set():
                    break
                await resp.write(f"event: {delta[0]}\ndata: {json.dumps(delta[1](chunk))}\n\n".encode())
        except (ConnectionError, RuntimeError):
            pass  # the client is gone (killed): that was the point
        return resp


Event = tuple[str, dict[str, Any]]


def _flood_events(wire: str) -> tuple[list[Event], tuple[str, Callable[[str], dict[str, Any]]]]:
    """The opening events of a streamed text reply, and how one text delta is written."""
    if wire == "anthropic":
        usage = {"input_tokens": 1, "output_tokens": 1}
        start: dict[str, Any] = {"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant"}
        start |= {"content": [], "model": "loopback", "stop_reason": None, "usage": usage}
        opening: list[Event] = [
            ("message_start", {"type": "message_start", "message": start}),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            ),
        ]
        return opening, (
            "content_block_delta",
            lambda t: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}},
        )
    item = f"msg_{uuid.uuid4().hex[:24]}"
    return [], (
        "response.output_text.delta",
        lambda t: {"type": "response.output_text.delta", "item_id": item, "output_index": 0, "delta": t},
    )


def _halves(text: str) -> list[str]:
    """The text in two deltas (a client must really join the stream), or one when it is that short."""
    cut = len(text) // 2
    return [text[:cut], text[cut:]] if cut else [text]


def _anthropic(reply: Reply, model: str, in_tokens: int) -> tuple[dict[str, Any], list[Event]]:
    """The Messages API answer: the whole ``message``, and the SSE events that stream it."""
    msg_id = f"msg_{uuid.uuid4().hex[:24]}"
    out_tokens = max(1, len(reply.text.split()))
    content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}]
    tool_id = f"toolu_{uuid.uuid4().hex[:24]}"
    if reply.tool is not None:
        content.append(
            {"type": "tool_use", "id": tool_id, "name": reply.tool.name, "input": reply.tool.arguments}
        )
    stop_reason = "tool_use" if reply.tool is not None else "end_turn"
    usage = {
        "input_tokens": in_tokens,
        "output_tokens": out_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    message = {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    events: list[Event] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": _empty_text()}),
        ("ping", {"type": "ping"}),
    ]
    for piece in _halves(reply.text):
        delta = {"type": "text_delta", "text": piece}
        events.append(("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}))
    events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
    if reply.tool is not None:
        block = {"type": "tool_use", "id": tool_id, "name": reply.tool.name, "input": {}}
        arguments = json.dumps(reply.tool.arguments)
        events += [
            ("content_block_start", {"type": "content_block_start", "index": 1, "content_block": block}),
            *(
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 1,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    },
                )
                for piece in _halves(arguments)
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        ]
    events += [
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": out_tokens},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return message, events


def _empty_text() -> dict[str, Any]:
    return {"type": "text", "text": ""}


def _responses(reply: Reply, model: str, in_tokens: int) -> tuple[dict[str, Any], list[Event]]:
    """The Responses API answer: the whole ``response``, and the events that stream it."""
    resp_id = f"resp_{uuid.uuid4().hex}"
    item_id = f"msg_{uuid.uuid4().hex}"
    out_tokens = max(1, len(reply.text.split()))
    usage = {
        "input_tokens": in_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": out_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": in_tokens + out_tokens,
    }
    part = {"type": "output_text", "text": reply.text, "annotations": []}
    item = {"id": item_id, "type": "message", "status": "completed", "role": "assistant", "content": [part]}
    output: list[dict[str, Any]] = [item]
    call: dict[str, Any] | None = None
    if reply.tool is not None:
        call = {
            "id": f"fc_{uuid.uuid4().hex}",
            "type": "function_call",
            "status": "completed",
            "call_id": f"call_{uuid.uuid4().hex[:24]}",
            "name": reply.tool.name,
            "arguments": json.dumps(reply.tool.arguments),
        }
        output.append(call)
    created = int(time.time())

    def response(status: str, items: list[dict[str, Any]], with_usage: bool) -> dict[str, Any]:
        return {
            "id": resp_id,
            "object": "response",
            "created_at": created,
            "status": status,
            "model": model,
            "output": items,
            "usage": usage if with_usage else None,
        }

    at = {"item_id": item_id, "output_index": 0, "content_index": 0}
    events: list[Event] = [
        ("response.created", {"type": "response.created", "response": response("in_progress", [], False)}),
        (
            "response.in_progress",
            {"type": "response.in_progress", "response": response("in_progress", [], False)},
        ),
        (
            "response.output_item.added",
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**item, "status": "in_progress", "content": []},
            },
        ),
        (
            "response.content_part.added",
            {"type": "response.content_part.added", **at, "part": {**part, "text": ""}},
        ),
        *(
            ("response.output_text.delta", {"type": "response.output_text.delta", **at, "delta": piece})
            for piece in _halves(reply.text)
        ),
        ("response.output_text.done", {"type": "response.output_text.done", **at, "text": reply.text}),
        ("response.content_part.done", {"type": "response.content_part.done", **at, "part": part}),
        ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
    ]
    if call is not None:
        fat = {"item_id": call["id"], "output_index": 1}
        events += [
            (
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "output_index": 1,
                    "item": {**call, "status": "in_progress", "arguments": ""},
                },
            ),
            *(
                (
                    "response.function_call_arguments.delta",
                    {"type": "response.function_call_arguments.delta", **fat, "delta": piece},
                )
                for piece in _halves(call["arguments"])
            ),
            (
                "response.function_call_arguments.done",
                {"type": "response.function_call_arguments.done", **fat, "arguments": call["arguments"]},
            ),
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": 1, "item": call},
            ),
        ]
    events.append(
        (
            "response.completed",
            {"type": "response.completed", "response": response("completed", output, True)},
        )
    )
    for seq, (_, data) in enumerate(events):
        data["sequence_number"] = seq
    return response("completed", output, True), events
