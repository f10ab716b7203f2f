"""A worker retrying an unreachable controller says so once, then every so often; never a URL per call."""

from __future__ import annotations

import itertools
import logging

import httpx
import pytest
from agentihooks_checkpoint.errors import StoreUnreachable
from agentihooks_checkpoint.stores.remote import ControlReporter, RetryNotice

URL = "http://10.0.0.9:8080"
FIRST = "the controller cannot be reached (ConnectError); retrying for up to 120 s"
TOKEN = "wtok-" + "s" * 40


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def retry_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "agentihooks_checkpoint.stores.remote"]


def test_an_outage_is_said_once_then_every_interval_then_its_end(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    notice = RetryNotice(every=30, clock=clock)
    caplog.set_level(logging.INFO)
    for _ in range(20):  # 20 failures within 19 s: one line
        notice.failed("ConnectError", 120)
        clock.now += 1
    assert retry_lines(caplog) == [FIRST]
    clock.now += 10  # 30 s after the first line
    notice.failed("503", 120)
    notice.failed("503", 120)
    assert retry_lines(caplog)[1:] == ["still retrying the controller (503): 21 retries over 30 s"]
    notice.answered()
    notice.answered()  # said once
    assert retry_lines(caplog)[2:] == ["the controller answered again after 22 retries over 30 s"]
    notice.answered()
    notice.failed("ConnectError", 120)  # a new outage starts over
    assert retry_lines(caplog)[3:] == [FIRST]


def test_a_call_that_never_gets_through_logs_one_line_without_url_or_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    calls: list[str] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        calls.append(str(request.url))
        raise httpx.ConnectError("connection refused", request=request)

    http = httpx.Client(transport=httpx.MockTransport(refuse))
    notice = RetryNotice(every=30)
    reporter = ControlReporter(
        URL, "e-1", TOKEN, http=http, retry_seconds=1.0, sleep=lambda s: None, retries=12
    )
    reporter._c.notice = notice
    with pytest.raises(StoreUnreachable):
        reporter.report_progress("e-1", "sess-1", 3)
    assert len(calls) == 13  # retried
    lines = retry_lines(caplog)
    assert lines == ["the controller cannot be reached (ConnectError); retrying for up to 1 s"]
    for record in caplog.records:
        text = record.getMessage()
        assert "10.0.0.9" not in text and "/v1/executions" not in text and TOKEN not in text, text


def test_a_controller_answering_again_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    answers = itertools.chain([503, 503, 503], itertools.repeat(200))

    def flaky(request: httpx.Request) -> httpx.Response:
        status = next(answers)
        body = {"error": "not_leader", "message": "x"} if status == 503 else {"ok": True}
        return httpx.Response(status, json=body)

    reporter = ControlReporter(
        URL, "e-1", TOKEN, http=httpx.Client(transport=httpx.MockTransport(flaky)), sleep=lambda s: None
    )
    reporter._c.notice = RetryNotice(every=30)
    reporter.report_progress("e-1", "sess-1", 3)  # two calls, the second answered at once
    lines = retry_lines(caplog)
    assert lines[0] == "the controller cannot be reached (503); retrying for up to 120 s"
    assert lines[1].startswith("the controller answered again after 3 retries")
    assert len(lines) == 2
