"""The loopback model API's own surface: streamed and whole answers of both wires, side requests, recording.

The real CLIs exercise the streamed turns in test_real_cli_resume.py; these
check the rest over real HTTP: the event order, the non-streaming answers,
``count_tokens``, the script, and that every body is kept byte for byte.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
from testsupport.model_api import HOLD, SIDE_REPLY, ModelApi, Reply, ToolCall


def sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        out.append((lines["event"], json.loads(lines["data"])))
    return out


def test_messages_stream_and_whole_answers() -> None:
    with ModelApi(["ack 1", Reply("ack 2", ToolCall("Read", {"file_path": "/x"}))]) as api:
        messages = [{"role": "user", "content": "a\u2028b"}]
        body = {"model": "m", "stream": True, "tools": [{"name": "Read"}], "messages": messages}
        raw = json.dumps(body, ensure_ascii=False).encode()  # raw U+2028, as the CLIs send it
        r = httpx.post(f"{api.base_url}/v1/messages", content=raw, headers={"x-api-key": "dummy"})
        assert r.headers["content-type"].startswith("text/event-stream")
        events = sse(r.text)
        assert [name for name, _ in events] == [
            "message_start",
            "content_block_start",
            "ping",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
        assert "".join(d["delta"]["text"] for n, d in events if n == "content_block_delta") == "ack 1"
        assert events[-2][1]["delta"]["stop_reason"] == "end_turn" and events[-2][1]["usage"]["output_tokens"]
        whole = httpx.post(f"{api.base_url}/v1/messages", json={**body, "stream": False}).json()
        assert whole["content"][0] == {"type": "text", "text": "ack 2"}
        assert whole["content"][1]["type"] == "tool_use" and whole["content"][1]["input"] == {
            "file_path": "/x"
        }
        assert whole["stop_reason"] == "tool_use"
        counted = httpx.post(f"{api.base_url}/v1/messages/count_tokens", json={"messages": []}).json()
        assert counted["input_tokens"] >= 1
        side = httpx.post(f"{api.base_url}/v1/messages", json={"model": "m", "max_tokens": 1, "messages": []})
        assert side.json()["content"][0]["text"] == SIDE_REPLY
        recorded = api.snapshot()
        assert recorded[0].body == raw and recorded[0].json == body  # kept byte for byte
        assert recorded[0].headers["x-api-key"] == "dummy"
        assert [r.role for r in recorded] == ["conversation", "conversation", "other", "side"]
        assert [r.reply.text for r in api.conversation() if r.reply] == ["ack 1", "ack 2"]


def test_responses_stream_with_a_function_call_and_the_script_past_its_end() -> None:
    with ModelApi([Reply("ack 1", ToolCall("get_goal", {}))]) as api:
        r = httpx.post(f"{api.openai_base_url}/responses", json={"model": "m", "stream": True, "input": []})
        events = sse(r.text)
        names = [name for name, _ in events]
        assert names[0] == "response.created" and names[-1] == "response.completed"
        assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
        done = [d["item"] for n, d in events if n == "response.output_item.done"]
        assert done[0]["content"][0]["text"] == "ack 1"
        assert done[1]["type"] == "function_call" and done[1]["name"] == "get_goal"
        assert "response.function_call_arguments.done" in names
        completed = events[-1][1]["response"]
        assert completed["status"] == "completed" and completed["usage"]["total_tokens"] > 0
        again = httpx.post(f"{api.openai_base_url}/responses", json={"model": "m", "input": []}).json()
        assert again["output"][0]["content"][0]["text"] == "ack 2"  # past the script: ack <n>


def test_a_held_request_stays_open_until_the_api_stops() -> None:
    api = ModelApi([HOLD]).start()
    answers: list[int] = []

    def call() -> None:
        answers.append(httpx.post(f"{api.base_url}/v1/messages", json={"tools": [1]}, timeout=60).status_code)

    caller = threading.Thread(target=call)
    caller.start()
    api.wait_for(lambda a: any(r.held for r in a.snapshot()), timeout=30)
    assert answers == []
    api.stop()
    caller.join(timeout=60)
    assert answers == [503]
