"""Bearer parsing, digest comparison, master binding and the operator token's digest."""

from __future__ import annotations

import hashlib

import pytest
from agentihooks_operator.api.access.auth import (
    Caller,
    bearer_token,
    is_operator,
    master_agent,
    require_token,
    same_digest,
    sha256_hex,
)
from agentihooks_operator.api.config import ApiConfig
from agentihooks_operator.api.errors import HttpProblem
from pydantic import ValidationError


@pytest.mark.parametrize(
    ("header", "token"),
    [("Bearer abc.DEF-123_~+/=", "abc.DEF-123_~+/="), ("bearer tok", "tok"), ("  Bearer tok  ", "tok")],
)
def test_bearer_tokens_are_read(header: str, token: str) -> None:
    assert bearer_token(header) == token


@pytest.mark.parametrize(
    "header",
    [
        "Bearer",
        "Bearer ",
        "Basic abc",
        "Bearer a b",
        "Bearer a\tb",
        "Bearer tok\u00e9n",
        "Bearer " + "a" * 4097,
        "Bearer ===",
        "Token x",
        "",
    ],
)
def test_malformed_headers_are_401_and_do_not_echo(header: str) -> None:
    with pytest.raises(HttpProblem) as e:
        bearer_token(header)
    assert e.value.status == 401 and e.value.code == "malformed_credential"
    assert e.value.message == "the Authorization header must be 'Bearer <token>'"  # never the header itself


def test_missing_header_is_none_or_401_when_required() -> None:
    assert bearer_token(None) is None
    with pytest.raises(HttpProblem) as e:
        require_token(None)
    assert e.value.status == 401 and e.value.code == "missing_credential"


def test_digests_compare_and_a_missing_digest_never_matches() -> None:
    d = sha256_hex("secret-token")
    assert d == hashlib.sha256(b"secret-token").hexdigest()
    assert same_digest(d, d)
    assert not same_digest(d, sha256_hex("other"))
    assert not same_digest(d, None)
    assert is_operator(d, d) and not is_operator(d, None)


def test_master_binding_names_exactly_one_agent() -> None:
    masters = {"m1": sha256_hex("t1"), "m2": sha256_hex("t2"), "m3": None}
    assert master_agent(sha256_hex("t1"), masters) == "m1"
    assert master_agent(sha256_hex("t2"), masters) == "m2"
    assert master_agent(sha256_hex("t3"), masters) is None
    assert Caller("master", agent="m2").decided_by == "m2"
    assert Caller("operator").decided_by == "operator"


def test_operator_token_is_kept_only_as_its_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTIHOOKS_OPERATOR_TOKEN", "tok-123")
    cfg = ApiConfig()
    assert cfg.operator_hash() == sha256_hex("tok-123")
    assert "tok-123" not in repr(cfg) and "tok-123" not in str(cfg.model_dump())
    monkeypatch.delenv("AGENTIHOOKS_OPERATOR_TOKEN")
    assert ApiConfig().operator_hash() is None
    monkeypatch.setenv("AGENTIHOOKS_OPERATOR_TOKEN_SHA256", sha256_hex("x").upper())
    assert ApiConfig().operator_hash() == sha256_hex("x")
    monkeypatch.setenv("AGENTIHOOKS_OPERATOR_TOKEN_SHA256", "not-hex")
    with pytest.raises(ValidationError, match="64 hex digits"):
        ApiConfig()
