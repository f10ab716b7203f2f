"""A card whose attempt is fenced but has no decision record yet reads Recovering and offers no choice.

The controller crashes just before it writes the decision record (after the
fence and its releases); the page shows the card without controls, and the
restarted controller's next pass turns it into a card that waits for a choice.
"""

from __future__ import annotations

import re

import pytest
from agentihooks_operator.recovery import CrashAt, InjectedFault, Recovery
from testsupport.recovery import observe

from .conftest import Browser, World

expect = pytest.importorskip("playwright.sync_api").expect


def test_recovering_card_has_no_controls_until_the_decision_record_exists(
    world: World, browser: Browser
) -> None:
    spec, plans = world.specs["swarm-a"], world.first["swarm-a"]
    lost = world.plan("eng-1").execution_id
    world.recoveries["swarm-a"].pause()
    crashing = Recovery(
        world.client,
        "swarm-a",
        holder="ctl-a",
        catalog=world.store,
        launcher=world.launcher,
        faults=CrashAt("before:decide"),
    )
    world.registry.publish("swarm-a", crashing, spec, holder="ctl-a")
    obs = observe([(p.execution_id, p.seat, 1) for p in plans], failed={lost: "oom_killed"})
    with pytest.raises(InjectedFault):
        crashing.reconcile(spec, obs)

    b = browser
    b.page.goto(f"{world.url}/ledger/swarm-a")
    b.page.get_by_label("Access token").fill(world.tokens["operator"])
    b.page.get_by_role("button", name="Sign in").click()
    card = b.page.locator(f'article.card[data-execution="{lost}"]')
    expect(card).to_have_attribute("data-state", "recovering")
    expect(card.locator("p.state-badge")).to_have_text("Recovering")
    expect(card.locator("button")).to_have_count(0)

    crashing.reconcile(spec, obs)  # the restarted controller writes the decision record
    expect(card).to_have_attribute("data-state", "awaiting", timeout=10_000)
    expect(card.get_by_role("button", name=re.compile(r"^Start fresh for seat eng-1$"))).to_be_visible()
