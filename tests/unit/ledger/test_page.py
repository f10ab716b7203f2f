"""The ledger page's shell, assets, headers and settings, checked without a server or a browser."""

from __future__ import annotations

import re

import pytest
from agentihooks_operator.api.errors import HttpProblem
from agentihooks_operator.ledger import CSP, SECURITY_HEADERS
from agentihooks_operator.ledger.config import LedgerConfig
from agentihooks_operator.ledger.page import ASSETS, asset, render_page
from agentihooks_operator.ledger.security import is_ledger_path
from pydantic import ValidationError


def test_shell_escapes_and_carries_only_the_swarm_name_and_poll_interval() -> None:
    page = render_page("team.a@b-1", 2000)
    assert 'data-swarm="team.a@b-1"' in page and 'data-poll-ms="2000"' in page
    assert "<title>Ledger: team.a@b-1</title>" in page
    assert "$" not in page  # every placeholder was filled


@pytest.mark.parametrize("bad", ['"><script>x</script>', "a b", "", "-x", "x/y", "a" * 129, "ä"])
def test_names_that_cannot_be_swarms_are_refused(bad: str) -> None:
    with pytest.raises(HttpProblem) as e:
        render_page(bad, 2000)
    assert e.value.status == 400 and e.value.code == "invalid_swarm"
    assert bad not in e.value.message or not bad


def test_shell_has_no_inline_script_style_or_handlers() -> None:
    page = render_page("swarm-a", 2000)
    scripts = re.findall(r"<script\b[^>]*>(.*?)</script>", page, re.S)
    assert scripts == ["", ""]  # external scripts only (the shared sign-in, then the page's), empty bodies
    assert re.findall(r"<script\b[^>]*\bsrc=\"/ledger/static/([a-z]+\.js)\"", page) == [
        "session.js",
        "ledger.js",
    ]
    assert "<style" not in page and " style=" not in page
    assert not re.search(r"\son[a-z]+\s*=", page)
    assert "javascript:" not in page


def test_every_control_in_the_shell_is_labelled() -> None:
    page = render_page("swarm-a", 2000)
    assert '<label for="token">' in page and 'id="token"' in page
    assert re.search(r'<input id="token" type="password"', page)
    assert not re.search(r"<input[^>]*\sname=", page)  # no name: a form submission never carries the token
    for button in re.findall(r"<button[^>]*>([^<]*)</button>", page):
        assert button.strip()


def test_script_builds_the_page_with_text_only() -> None:
    js = asset("ledger.js")[0].decode() + asset("session.js")[0].decode()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in js, sink
    assert "console." not in js  # nothing is logged, the token least of all
    assert "localStorage" not in js and "document.cookie" not in js
    assert "sessionStorage" in js and "'Bearer ' + token" in js


def test_assets_are_a_fixed_list() -> None:
    for name, (body, content_type) in ((n, asset(n)) for n in ASSETS):
        assert body and content_type == ASSETS[name]
    for name in ("../page.py", "page.py", "ledger.html", "", "LEDGER.JS"):
        with pytest.raises(HttpProblem) as e:
            asset(name)
        assert e.value.status == 404 and e.value.code == "unknown_asset"
        assert not name or name not in e.value.message, "the asked-for name is not echoed"


def test_csp_is_strict() -> None:
    directives = dict(d.strip().split(" ", 1) for d in CSP.split(";"))
    assert directives["default-src"] == "'self'"
    assert directives["script-src"] == "'self'" and directives["style-src"] == "'self'"
    assert directives["object-src"] == "'none'" and directives["frame-ancestors"] == "'none'"
    assert directives["base-uri"] == "'none'"
    assert "unsafe" not in CSP and "*" not in CSP and "data:" not in CSP
    assert SECURITY_HEADERS["Content-Security-Policy"] == CSP


@pytest.mark.parametrize(
    ("path", "covered"),
    [
        ("/ledger", True),
        ("/ledger/swarm-a", True),
        ("/ledger/static/ledger.js", True),
        ("/v1/swarms/swarm-a/ledger", True),
        ("/v1/swarms/swarm-a/status", False),
        ("/ledgers", False),
        ("/v1/swarms/a/b/ledger", False),
        ("/metrics", False),
    ],
)
def test_which_paths_get_the_headers(path: str, covered: bool) -> None:
    assert is_ledger_path(path) is covered


def test_poll_interval_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert LedgerConfig().poll_seconds == 2.0
    monkeypatch.setenv("AGENTIHOOKS_LEDGER_POLL_SECONDS", "0.5")
    assert LedgerConfig().poll_seconds == 0.5
    for bad in ("0", "-1", "abc", "601"):
        monkeypatch.setenv("AGENTIHOOKS_LEDGER_POLL_SECONDS", bad)
        with pytest.raises(ValidationError, match="poll_seconds"):
            LedgerConfig()
