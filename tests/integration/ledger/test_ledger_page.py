"""The ledger page in a real browser: cards, decisions, outcomes, refusals, escaping, CSP, keyboard.

Debian's Chromium runs headless through Playwright. The page polls on a timer;
tests that need a page to stay unchanged while something happens behind its
back pause the page's clock and then advance it to the next poll.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta

import pytest
from agentihooks_operator.ledger import CSP

from .conftest import HOSTILE, MASTER_A, MASTER_B, Browser, World

expect = pytest.importorskip("playwright.sync_api").expect
POLL_MS = 2000
START = datetime(2026, 11, 30, 9, 0, 0)


def sign_in(b: Browser, world: World, who: str, swarm: str = "swarm-a", *, frozen: bool = False) -> None:
    """Open the swarm's page and sign in with ``who``'s token typed into the form."""
    page = b.page
    page.clock.install(time=START)
    if frozen:
        page.clock.pause_at(START + timedelta(seconds=30))  # ahead of the installed time: a jump forward
    response = page.goto(f"{world.url}/ledger/{swarm}")
    assert response is not None and response.status == 200
    assert response.headers["content-security-policy"] == CSP
    page.get_by_label("Access token").fill(world.tokens[who])
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#whoami")).to_have_text(re.compile(r"^Signed in (as|with)"))


def next_poll(b: Browser) -> None:
    """Advance the page's clock past its poll interval: the page reads the ledger again on its own."""
    b.page.clock.run_for(POLL_MS + 100)


def card(b: Browser, seat: str = "eng-1"):  # type: ignore[no-untyped-def]
    return b.page.locator(f'article.card[data-seat="{seat}"]')


def row(b: Browser, seat: str):  # type: ignore[no-untyped-def]
    return b.page.locator(f'#ledger-rows tr[data-seat="{seat}"]')


def no_errors(b: Browser) -> None:
    bad = [m for m in b.console if m.startswith(("error", "pageerror")) and "403" not in m and "409" not in m]
    assert not bad, bad


def test_card_appears_on_failure_then_resume_goes_pending_then_reports_native(
    world: World, browser: Browser
) -> None:
    b = browser
    sign_in(b, world, MASTER_A)
    expect(row(b, "eng-1").locator("td.task-text")).to_have_text("Write the release notes for 2.1")
    expect(row(b, "eng-1").locator("td.generation")).to_have_text("1")
    expect(row(b, "eng-1").locator(".badge")).to_have_count(0)
    expect(b.page.locator("#no-handoffs")).to_be_visible()
    b.shot("01-signed-in-no-handoffs")

    (lost,) = world.fail("eng-1")
    built = world.checkpoint(lost)
    # No click: the page finds the failure on its own next poll (real time here, no clock advance).
    expect(card(b)).to_have_attribute("data-state", "awaiting", timeout=POLL_MS * 5)
    expect(card(b).locator("dd.reason")).to_have_text(
        f"oom_killed; native resume from {built.checkpoint_id} at record {built.watermark}"
    )
    expect(card(b).locator("dd.checkpoint")).to_have_text(built.checkpoint_id)
    expect(row(b, "eng-1").locator(".badge")).to_have_text("RECOVERY PENDING")
    resume = card(b).get_by_role("button", name="Resume native for seat eng-1")
    expect(resume).to_be_visible()
    expect(card(b).get_by_role("button", name="Start fresh for seat eng-1")).to_be_visible()
    b.shot("02-awaiting-decision")

    resume.click()
    expect(card(b)).to_have_attribute("data-state", "pending")
    expect(card(b).locator("dd.continuity")).to_have_text("pending")
    expect(card(b).locator("dd.decision")).to_have_text("Resume native")
    expect(card(b).get_by_role("button")).to_have_count(0)
    expect(row(b, "eng-1").locator(".badge")).to_have_text("RECOVERY PENDING")
    decision = json.loads(world.client.hget(world.recoveries["swarm-a"].keys.attempt_recoveries, lost))
    assert decision["mode"] == "resume" and decision["decided_by"] == MASTER_A
    replacement = decision["replacement"]
    expect(card(b).locator("dd.successor")).to_have_text(replacement)
    expect(row(b, "eng-1").locator("td.generation")).to_have_text("2")
    b.shot("03-replacement-pending")

    r = world.report(replacement)
    assert r.status_code == 200, r.text
    next_poll(b)
    expect(card(b)).to_have_attribute("data-state", "recovered")
    expect(card(b).locator("dd.continuity")).to_have_text(
        f"native from {built.checkpoint_id} at record {built.watermark} (verified)"
    )
    expect(row(b, "eng-1").locator(".badge")).to_have_count(0)
    b.shot("04-recovered-native")
    no_errors(b)


def test_token_goes_only_into_the_authorization_header(
    world: World, browser: Browser, caplog: pytest.LogCaptureFixture
) -> None:
    b = browser
    caplog.set_level("DEBUG")
    b.page.goto(f"{world.url}/ledger/swarm-a")
    b.page.get_by_label("Access token").fill("not a token \u00fc")
    b.page.get_by_role("button", name="Sign in").click()
    expect(b.page.locator("#signin-problem")).to_contain_text("That is not a bearer token")
    expect(b.page.get_by_label("Access token")).to_be_focused()
    assert not [u for u, _ in b.requests if "/v1/" in u]

    sign_in(b, world, "operator")
    token = world.tokens["operator"]
    expect(b.page.locator("#tasks")).to_be_visible()
    assert token not in b.page.url
    api_calls = [(u, h) for u, h in b.requests if "/v1/" in u]
    assert api_calls, "the page read nothing"
    for url, headers in api_calls:
        assert token not in url
        assert headers.get("authorization") == f"Bearer {token}"
        assert "cookie" not in headers
    assert b.page.evaluate("document.cookie") == ""
    assert not any(token in m for m in b.console)
    assert not any(token in r.getMessage() for r in caplog.records)
    b.page.get_by_role("button", name="Sign out").click()
    expect(b.page.get_by_label("Access token")).to_be_focused()
    assert b.page.evaluate("window.sessionStorage.length") == 0
    expect(b.page.locator("#ledger-rows tr")).to_have_count(0)


def test_master_of_another_swarm_sees_forbidden_scope(world: World, browser: Browser) -> None:
    b = browser
    world.fail("eng-1")
    sign_in(b, world, MASTER_B, swarm="swarm-a")
    problem = b.page.locator("#problem")
    expect(problem).to_be_visible()
    expect(problem).to_have_attribute("data-reason", "forbidden_scope")
    expect(problem).to_contain_text("forbidden_scope")
    expect(b.page.locator("article.card")).to_have_count(0)
    expect(b.page.locator("#ledger-rows tr")).to_have_count(0)
    b.shot("05-forbidden-scope")


def test_refusals_show_their_reason_on_the_card(world: World, browser: Browser) -> None:
    b = browser
    one, two = world.fail("eng-1", "eng-2")
    world.checkpoint(one, "eng-1")
    world.checkpoint(two, "eng-2", kind="context")
    sign_in(b, world, MASTER_A, frozen=True)
    expect(card(b, "eng-1").get_by_role("button", name="Resume native for seat eng-1")).to_be_visible()
    expect(
        card(b, "eng-2").get_by_role("button", name="Continue from context for seat eng-2")
    ).to_be_visible()

    # Behind the page's back: the operator starts eng-1 fresh; the master's stale page still offers resume.
    answer = world.call(
        "POST",
        f"/v1/executions/{one}/restore-decision",
        world.tokens["operator"],
        json={"choice": "fresh", "agent": "operator"},
    )
    assert answer.status_code == 200, answer.text
    card(b, "eng-1").get_by_role("button", name="Resume native for seat eng-1").click()
    refusal = card(b, "eng-1").locator("p.refusal")
    expect(refusal).to_have_text("Refused: no recovery decision is pending for this attempt")
    expect(card(b, "eng-1")).to_have_attribute("data-state", "pending")
    expect(card(b, "eng-1").locator("dd.decision")).to_have_text("Start fresh")

    # The checkpoints vanish; eng-2's card still offers to continue from context until the next poll.
    world.drop_checkpoints()
    card(b, "eng-2").get_by_role("button", name="Continue from context for seat eng-2").click()
    expect(card(b, "eng-2").locator("p.refusal")).to_have_text(
        "Refused: no complete compatible checkpoint to resume from"
    )
    expect(card(b, "eng-2")).to_have_attribute("data-state", "awaiting")
    expect(card(b, "eng-2").get_by_role("button", name=re.compile("Continue from context"))).to_have_count(0)
    expect(card(b, "eng-2").get_by_role("button", name="Start fresh for seat eng-2")).to_be_visible()

    # The master loses its place in the swarm: its next choice is refused as forbidden_scope.
    world.registry.publish(
        "swarm-a",
        world.recoveries["swarm-a"],
        world.specs["swarm-a"].model_copy(update={"masters": []}),
        holder="ctl-a",
    )
    card(b, "eng-2").get_by_role("button", name="Start fresh for seat eng-2").click()
    expect(card(b, "eng-2").locator("p.refusal")).to_have_text("Refused: forbidden_scope")
    expect(card(b, "eng-2").locator("p.refusal")).to_have_attribute("data-reason", "forbidden_scope")
    b.shot("06-refusals")
    decision = json.loads(world.client.hget(world.recoveries["swarm-a"].keys.attempt_recoveries, two))
    assert decision["mode"] == "recovery_pending"


def test_task_text_with_html_and_script_is_shown_as_text(world: World, browser: Browser) -> None:
    b = browser
    world.fail("eng-2")
    sign_in(b, world, "operator")
    cell = row(b, "eng-2").locator("td.task-text")
    expect(cell).to_have_text(HOSTILE)
    assert cell.evaluate("e => e.textContent") == HOSTILE
    assert cell.evaluate("e => e.children.length") == 0
    assert b.page.locator("#ledger img, #ledger script, #ledger b, #cards img, #cards script").count() == 0
    assert b.page.evaluate("window.__pwned") is None
    expect(row(b, "eng-2").locator(".badge")).to_have_text("RECOVERY PENDING")
    b.shot("07-html-task-text")
    no_errors(b)


def test_operator_pauses_and_unpauses_and_a_master_only_sees_the_switch(
    world: World, browser: Browser
) -> None:
    b = browser
    sign_in(b, world, "operator")
    keys = world.recoveries["swarm-a"].keys
    expect(b.page.locator("#pause-state")).to_have_text("not paused")
    b.page.get_by_role("button", name="Pause recovery").click()
    expect(b.page.locator("#pause-state")).to_have_text("paused")
    assert world.client.exists(keys.recovery_paused)
    expect(b.page.get_by_role("button", name="Unpause recovery")).to_be_focused()
    b.shot("08-paused")
    b.page.keyboard.press("Enter")
    expect(b.page.locator("#pause-state")).to_have_text("not paused")
    assert not world.client.exists(keys.recovery_paused)

    b.page.get_by_role("button", name="Sign out").click()
    b.page.get_by_label("Access token").fill(world.tokens[MASTER_A])
    b.page.get_by_role("button", name="Sign in").click()
    expect(b.page.locator("#pause-note")).to_contain_text("Only the operator can change the switch")
    expect(b.page.locator("#pause-switch")).to_be_hidden()
    no_errors(b)


def test_keyboard_only_sign_in_and_fresh_decision(world: World, browser: Browser) -> None:
    b = browser
    (lost,) = world.fail("eng-1")
    world.checkpoint(lost, kind="context")
    page = b.page
    page.clock.install(time=START)
    page.goto(f"{world.url}/ledger/swarm-a")
    order = []
    for _ in range(3):
        page.keyboard.press("Tab")
        order.append(page.evaluate("document.activeElement.id || document.activeElement.textContent"))
    assert order == ["Skip to Handoff outcomes", "token", "signin-button"], order
    page.keyboard.press("Shift+Tab")
    page.keyboard.type(world.tokens["operator"])
    page.keyboard.press("Enter")
    expect(card(b)).to_have_attribute("data-state", "awaiting")
    expect(card(b).locator("dd.reason")).to_contain_text("oom_killed; continue from context from")

    labels = []
    for _ in range(12):
        page.keyboard.press("Tab")
        labels.append(
            page.evaluate(
                "document.activeElement.getAttribute('aria-label') || document.activeElement.textContent"
            )
        )
        if labels[-1] == "Start fresh for seat eng-1":
            break
    assert labels[-2:] == ["Continue from context for seat eng-1", "Start fresh for seat eng-1"], labels
    b.shot("09-keyboard-focus-on-start-fresh")
    page.keyboard.press("Enter")
    expect(card(b)).to_have_attribute("data-state", "pending")
    expect(card(b).locator("h3")).to_be_focused()
    decision = json.loads(world.client.hget(world.recoveries["swarm-a"].keys.attempt_recoveries, lost))
    assert decision["mode"] == "fresh" and decision["decided_by"] == "operator"
    no_errors(b)


def test_keyboard_focus_survives_the_page_updating_itself(world: World, browser: Browser) -> None:
    b = browser
    world.fail("eng-1")
    sign_in(b, world, MASTER_A, frozen=True)
    fresh = card(b, "eng-1").get_by_role("button", name="Start fresh for seat eng-1")
    fresh.focus()
    expect(fresh).to_be_focused()

    # Another seat fails: a new card appears; the focused one is untouched.
    world.fail("eng-2")
    next_poll(b)
    expect(card(b, "eng-2")).to_have_attribute("data-state", "awaiting")
    expect(fresh).to_be_focused()

    # The focused card itself changes (a checkpoint appears): it is redrawn and focus stays on its control.
    world.checkpoint(world.plan("eng-1").execution_id)
    next_poll(b)
    expect(card(b, "eng-1").get_by_role("button", name="Resume native for seat eng-1")).to_be_visible()
    expect(card(b, "eng-1").get_by_role("button", name="Start fresh for seat eng-1")).to_be_focused()
    b.page.keyboard.press("Shift+Tab")
    expect(card(b, "eng-1").get_by_role("button", name="Resume native for seat eng-1")).to_be_focused()
    no_errors(b)
