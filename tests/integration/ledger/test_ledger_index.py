"""``/ledger/``: the swarms the caller may see, in a real browser (Debian's Chromium via Playwright).

The shell is server-rendered, carries no data and has the ledger's strict CSP; its script reads
``GET /v1/swarms`` (the visibility of ``agentihooks swarm list``) with the signed-in token and fills the
list with ``textContent`` only. The token is the ledger page's own: a swarm opened from the list is
already signed in.
"""

from __future__ import annotations

import re
from importlib import resources

import pytest
from agentihooks_operator.ledger import CSP

from .conftest import MASTER_A, MASTER_B, Browser, World

expect = pytest.importorskip("playwright.sync_api").expect


def open_index(b: Browser, world: World, path: str = "/ledger/") -> None:
    response = b.page.goto(f"{world.url}{path}")
    assert response is not None and response.status == 200
    assert response.headers["content-security-policy"] == CSP
    assert response.headers["x-frame-options"] == "DENY"


def sign_in(b: Browser, world: World, token: str) -> None:
    b.page.get_by_label("Access token").fill(token)
    b.page.get_by_role("button", name="Sign in").click()


def listed(b: Browser) -> list[str]:
    items = b.page.locator("#swarm-list li")
    return [str(x) for x in items.evaluate_all("ns => ns.map(n => n.dataset.swarm)")]


def no_errors(b: Browser) -> None:
    bad = [m for m in b.console if m.startswith(("error", "pageerror")) and "401" not in m and "403" not in m]
    assert not bad, bad


def test_the_shell_carries_no_data_and_the_data_route_needs_a_token(world: World) -> None:
    for path in ("/ledger/", "/ledger"):
        r = world.call("GET", path)
        assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/html")
        assert r.headers["Content-Security-Policy"] == CSP
        assert "swarm-a" not in r.text and "swarm-b" not in r.text
        assert "<script>" not in r.text and "style=" not in r.text  # nothing inline: the CSP forbids it
    js = world.call("GET", "/ledger/static/index.js")
    assert js.status_code == 200 and js.headers["Content-Security-Policy"] == CSP
    assert world.call("GET", "/v1/swarms").status_code == 401


def test_the_script_never_writes_html() -> None:
    static = resources.files("agentihooks_operator.ledger").joinpath("static")
    source = static.joinpath("index.js").read_text() + static.joinpath("session.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in source


def test_without_a_token_the_sign_in_form_shows_and_nothing_is_listed(world: World, browser: Browser) -> None:
    b = browser
    open_index(b, world)
    expect(b.page.locator("#signin")).to_be_visible()
    expect(b.page.locator("#whoami")).to_have_text("Not signed in")
    expect(b.page.locator("#swarms")).to_be_hidden()
    assert listed(b) == []
    assert not [u for u, _ in b.requests if "/v1/" in u]  # no data asked for without a token
    b.shot("index-01-signed-out")
    no_errors(b)


def test_the_operator_sees_every_swarm_and_opens_one_signed_in(world: World, browser: Browser) -> None:
    b = browser
    open_index(b, world)
    sign_in(b, world, world.tokens["operator"])
    expect(b.page.locator("#swarm-list li")).to_have_count(2)
    assert listed(b) == ["swarm-a", "swarm-b"]
    link = b.page.get_by_role("link", name="swarm-a")
    expect(link).to_have_attribute("href", "/ledger/default/swarm-a")
    expect(b.page.locator('#swarm-list li[data-swarm="swarm-a"] .seats')).to_have_text(" 2 seats")
    expect(b.page.locator('#swarm-list li[data-swarm="swarm-b"] .seats')).to_have_text(" 1 seat")
    b.shot("index-02-operator")
    sent = [h for u, h in b.requests if u.endswith("/v1/swarms")]
    assert sent and all(h.get("authorization") == f"Bearer {world.tokens['operator']}" for h in sent)
    link.click()
    expect(b.page).to_have_url(f"{world.url}/ledger/default/swarm-a")
    expect(b.page.locator("#whoami")).to_have_text("Signed in as the operator")
    no_errors(b)


def test_a_master_sees_only_its_own_swarm(world: World, browser: Browser) -> None:
    b = browser
    open_index(b, world)
    sign_in(b, world, world.tokens[MASTER_A])
    expect(b.page.locator("#swarm-list li")).to_have_count(1)
    assert listed(b) == ["swarm-a"]
    b.shot("index-03-master-a")
    b.page.get_by_role("button", name="Sign out").click()
    expect(b.page.locator("#swarm-list li")).to_have_count(0)
    sign_in(b, world, world.tokens[MASTER_B])
    expect(b.page.locator("#swarm-list li")).to_have_count(1)
    assert listed(b) == ["swarm-b"]
    # a reload keeps the tab's sign-in
    b.page.reload()
    expect(b.page.locator("#swarm-list li")).to_have_count(1)
    assert listed(b) == ["swarm-b"]
    no_errors(b)


def test_an_unknown_token_and_a_worker_token_are_told_apart(world: World, browser: Browser) -> None:
    b = browser
    open_index(b, world)
    sign_in(b, world, "nobody-holds-this-token")
    problem = b.page.locator("#problem")
    expect(problem).to_have_text("The controller did not accept this token.")
    expect(problem).to_have_attribute("data-status", "401")
    assert listed(b) == []
    b.page.get_by_role("button", name="Sign out").click()
    worker = world.first["swarm-a"][0].worker_token.get_secret_value()
    sign_in(b, world, worker)
    expect(problem).to_have_text(re.compile(r"^This token may not list swarms \(forbidden_scope\)"))
    expect(problem).to_have_attribute("data-status", "403")
    assert listed(b) == []
    b.shot("index-04-refused")
