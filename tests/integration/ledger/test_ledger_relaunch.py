"""The ledger's Relaunch control: a refused restore on its card, relaunched with one click.

Real browser (Chromium through Playwright), live control API, real Redis. The
seat is resumed natively; its replacement reports a ``version_changed``
refusal with its own worker credential (what the worker does before it exits
64). The card reads ``Restore refused`` with the reason and what to fix, and a
Relaunch button; clicking it launches the same directive as the next
generation, and a second relaunch of the same refusal answers the same one.
"""

from __future__ import annotations

import json

import pytest

from .conftest import MASTER_A, Browser, World
from .test_ledger_page import card, no_errors, sign_in

expect = pytest.importorskip("playwright.sync_api").expect


def test_a_refused_restore_shows_its_fix_and_relaunches_from_the_card(world: World, browser: Browser) -> None:
    b = browser
    (lost,) = world.fail("eng-1")
    world.checkpoint(lost)
    r = world.recoveries["swarm-a"]
    decided = r.decide(lost, "resume", "operator", spec=world.specs["swarm-a"])
    refused = decided.replacement
    assert refused is not None
    token = world.launcher.pods[refused].worker_token.get_secret_value()
    body = {"execution_id": refused, "reason": "version_changed", "message": "version_changed"}
    answer = world.call("POST", f"/v1/executions/{refused}/restore-refusal", token, json=body)
    assert answer.status_code == 200, answer.text

    sign_in(b, world, MASTER_A)
    expect(card(b)).to_have_attribute("data-state", "refused")
    expect(card(b).locator("p.state-badge")).to_have_text("Restore refused")
    expect(card(b).locator("dd.reason")).to_contain_text("restore refused: version_changed")
    expect(card(b).locator("dd.restore-refused")).to_have_text(f"version_changed ({refused})")
    expect(card(b).locator("dd.fix-hint")).to_contain_text("set the Swarm's image")
    relaunch = card(b).get_by_role("button", name="Relaunch the refused replacement of seat eng-1")
    expect(relaunch).to_be_visible()
    b.shot("10-restore-refused")

    relaunch.click()
    expect(b.page.locator("#announce")).to_contain_text("Relaunched seat eng-1 as generation 3")
    new = r.current_execution("eng-1")
    assert new is not None and new != refused
    expect(card(b)).to_have_attribute("data-state", "pending")
    expect(card(b).locator("dd.successor")).to_have_text(new)
    expect(card(b).locator("dd.relaunches")).to_have_text("1")
    expect(card(b).get_by_role("button")).to_have_count(0)
    plan = world.launcher.pods[new]
    assert plan.directive == decided.directive and plan.generation == 3
    refusal = json.loads(world.client.hget(r.keys.restore_refusals, refused))
    assert refusal["relaunched_as"] == new and refusal["relaunched_by"] == MASTER_A
    # The same refusal relaunched again (a second tab, a double click): the same relaunch.
    again = world.call(
        "POST",
        "/v1/swarms/swarm-a/seats/eng-1/relaunch",
        world.tokens[MASTER_A],
        json={"execution_id": refused, "agent": MASTER_A},
    )
    assert again.status_code == 200 and again.json()["replayed"] is True
    assert again.json()["replacement"] == new and world.launcher.created[new] == 1
    b.shot("11-relaunched")
    no_errors(b)
