"""Pure parts of held recoveries: tokens, plans, progress, observation parsing, broker answers."""

from __future__ import annotations

import base64
import hashlib

import httpx
import pytest
from agentihooks_operator.cli.client import CliError
from agentihooks_operator.cli.recoveries import parse_observed
from agentihooks_operator.recovery import HttpBroker, ResumeRefused
from agentihooks_operator.recovery.held import new_call, new_token, plan_of, token_hash
from agentihooks_operator.recovery.resume import answer_of, progress_of
from agentihooks_operator.recovery.store.reads import Attempt
from agentihooks_operator.recovery.store.records import FenceRecord, HeldRecovery, JournalEntry
from agentihooks_operator.swarm import AccountBrokerSpec
from pydantic import ValidationError


def fence(**kw: object) -> FenceRecord:
    data: dict[str, object] = {
        "execution_id": "exe-" + "a" * 32,
        "generation": 1,
        "seat": "eng-1",
        "reason": "oom_killed",
        "controller_epoch": 1,
        "fenced_at_ms": 1,
        "tail": "t",
        "released": ["grant"],
    }
    data.update(kw)
    return FenceRecord.model_validate(data)


def test_tokens_are_24_random_bytes_and_only_their_sha256_is_kept() -> None:
    token, digest = new_token()
    assert len(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))) == 24
    assert digest == hashlib.sha256(token.encode()).hexdigest() == token_hash(token)
    assert token not in digest
    assert new_token()[0] != token and new_call() != new_call()


def test_the_plan_changes_with_the_broker_the_step_or_the_attempt() -> None:
    f = fence()
    base = plan_of(f, "release_account", "http://b")
    assert base == plan_of(f, "release_account", "http://b")
    assert base != plan_of(f, "release_account", "http://other")
    assert base != plan_of(f, "release_account", None)
    assert base != plan_of(fence(generation=2), "release_account", "http://b")
    assert base != plan_of(f, "retire", "http://b")


def _attempt(account: str | None) -> Attempt:
    journal = {"fence": "ok", "release_grant": "ok"}
    if account:
        journal["release_account"] = account
    return Attempt(
        "exe-" + "a" * 32,
        fence=fence(),
        journal={k: JournalEntry(status=v, epoch=1, at_ms=1) for k, v in journal.items()},  # type: ignore[arg-type]
    )


def test_progress_names_every_step_and_what_waiting_steps_accept() -> None:
    steps = {s.path: s for s in progress_of(_attempt("held"))}
    assert [s for s in steps] == ["fence", "release_grant", "release_account", "retire", "decide"]
    assert steps["release_account"].status == "held"
    assert steps["release_account"].accepts == ["applied", "not_applied"]
    assert steps["fence"].accepts is None and steps["retire"].status == "skipped"


def test_answer_status_is_the_worst_step_and_the_token_is_carried_only_when_given() -> None:
    rec = HeldRecovery(
        call="rc-0123456789abcdef",
        execution_id="exe-" + "a" * 32,
        seat="eng-1",
        step="release_account",
        since_ms=1,
        expires_at_ms=2,
        token_hash="",
        plan="p",
        seq=1,
    )
    held = answer_of(rec, _attempt("held"), token="t", kept=frozenset({"fence"}))
    assert held.status == "held" and held.resume_token == "t"
    assert held.progress[0].resumed == "kept" and held.progress[1].resumed is None
    assert held.summary == "5 steps: 2 ok, 1 held, 2 skipped"
    failed = answer_of(rec, _attempt("failed"), token=None, kept=frozenset())
    assert failed.status == "failed" and failed.resume_token is None


def test_refusal_codes_carry_their_http_status() -> None:
    expected = {
        "checkpoint_not_found": 404,
        "resume_token_invalid": 403,
        "observed_invalid": 400,
        "observed_required": 400,
        "plan_changed": 409,
    }
    for code, status in expected.items():
        assert ResumeRefused(code, "m").status == status
    with pytest.raises(KeyError):
        ResumeRefused("resume_failed", "not a refusal: it answers 200")


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        ([], {}),
        (["release_account=applied"], {"release_account": "applied"}),
        (["a=not_applied", "b=applied"], {"a": "not_applied", "b": "applied"}),
    ],
)
def test_observed_options_parse(items: list[str], expected: dict[str, str]) -> None:
    assert parse_observed(items) == expected


@pytest.mark.parametrize("bad", [["x"], ["=applied"], ["a=yes"], ["a=applied", "a=not_applied"]])
def test_bad_observed_options_are_named(bad: list[str]) -> None:
    with pytest.raises(CliError) as e:
        parse_observed(bad)
    assert "--observed" in e.value.line


@pytest.mark.parametrize(
    "data",
    [
        {"url": "ftp://broker"},
        {"url": "http://b", "timeoutSeconds": 0},
        {"url": "http://b", "timeoutSeconds": 121},
        {"url": "http://b", "credentialSecret": ""},
        {"url": "http://b", "other": 1},
    ],
)
def test_broker_spec_refuses_bad_values(data: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        AccountBrokerSpec.model_validate(data)


def _broker(handler: object) -> HttpBroker:
    return HttpBroker("http://broker", "cred", transport=httpx.MockTransport(handler))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("status", "result"),
    [
        (200, "released"),
        (204, "released"),
        (409, "released"),
        (400, "failed"),
        (401, "failed"),
        (500, "unknown"),
        (503, "unknown"),
    ],
)
def test_release_answers_are_classified(status: int, result: str) -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status, json={})

    assert _broker(handler).release("exe-1") == result
    assert seen[0].url.path == "/v1/slots/exe-1/release" and seen[0].headers["Authorization"] == "Bearer cred"


@pytest.mark.parametrize(
    ("error", "result"),
    [
        (httpx.ConnectError("refused"), "failed"),
        (httpx.ConnectTimeout("slow"), "failed"),
        (httpx.ReadTimeout("slow"), "unknown"),
        (httpx.RemoteProtocolError("dropped"), "unknown"),
    ],
)
def test_transport_errors_before_and_after_sending(error: Exception, result: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise error

    assert _broker(handler).release("exe-1") == result


@pytest.mark.parametrize(
    ("status", "body", "seen"),
    [
        (200, {"state": "released"}, "applied"),
        (200, {"state": "active"}, "not_applied"),
        (200, {"state": "odd"}, None),
        (200, ["no"], None),
        (404, {}, None),
        (503, {"state": "active"}, None),
    ],
)
def test_state_answers_are_observations_or_none(status: int, body: object, seen: str | None) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json=body)

    assert _broker(handler).observe("exe-1") == seen


def test_log_lines_name_the_broker_without_user_info(caplog: pytest.LogCaptureFixture) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, json={})

    broker = HttpBroker("https://user:s3cret@broker.example:8443/", transport=httpx.MockTransport(handler))
    with caplog.at_level("WARNING"):
        assert broker.release("exe-1") == "unknown"
        assert broker.observe("exe-1") is None
    assert "https://broker.example:8443" in caplog.text and "s3cret" not in caplog.text
