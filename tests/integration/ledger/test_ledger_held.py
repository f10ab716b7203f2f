"""A held recovery step on the ledger page: shown on the card, answered by the operator in one click.

``swarm-h`` releases account slots through the real HTTP test broker. The
broker applies the release but drops the answer and cannot report the slot's
state, so the controller holds the step. The page shows where it is held and
since when; the operator's answer first asks for a new resume token, then
resumes with the observation. A master sees the held step but no answers.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from agentihooks_operator.ledger import CSP
from agentihooks_operator.recovery import HttpBrokers, Recovery
from agentihooks_operator.swarm import SwarmSpec
from testsupport.broker import Broker, running_broker
from testsupport.recovery import observe

from .conftest import MASTER_A, Browser, World

expect = pytest.importorskip("playwright.sync_api").expect
SWARM = "swarm-h"


@pytest.fixture
def held(world: World) -> Iterator[tuple[Recovery, str, Broker]]:
    """``swarm-h`` with seat eng-1 failed and its account release held (automation paused)."""
    credential = "bk-" + secrets.token_urlsafe(16)
    with running_broker(credential) as broker:
        spec = SwarmSpec.model_validate(
            {
                "image": "registry.example/worker:v1",
                "harness": {"name": "claude", "command": ["claude"]},
                "seats": [
                    {"name": "eng-1", "project": "github.com/example/app", "task": {"id": "t-h", "text": "x"}}
                ],
                "masters": [{"agent": MASTER_A, "credentialSecret": "master-a"}],
                "accountBroker": {"url": broker.url, "credentialSecret": "broker-cred", "timeoutSeconds": 5},
            }
        )
        r = Recovery(
            world.client,
            SWARM,
            holder="ctl-a",
            catalog=world.store,
            launcher=world.launcher,
            brokers=HttpBrokers({"broker-cred": credential}.get),
        )
        (plan,) = r.ensure_seats(spec)
        world.registry.publish(SWARM, r, spec, holder="ctl-a")
        world.recoveries[SWARM], world.specs[SWARM] = r, spec
        r.pause()
        broker.mode = "refuse_state"
        r.reconcile(
            spec, observe([(plan.execution_id, "eng-1", 1)], failed={plan.execution_id: "oom_killed"})
        )
        assert [h.execution_id for h in r.held_recoveries()] == [plan.execution_id]
        yield r, plan.execution_id, broker


def open_page(b: Browser, world: World, who: str) -> None:
    response = b.page.goto(f"{world.url}/ledger/{SWARM}")
    assert response is not None and response.headers["content-security-policy"] == CSP
    b.page.get_by_label("Access token").fill(world.tokens[who])
    b.page.get_by_role("button", name="Sign in").click()
    expect(b.page.locator("#whoami")).to_have_text(re.compile(r"^Signed in as"))


def test_operator_answers_a_held_step_from_the_card(
    world: World, browser: Browser, held: tuple[Recovery, str, Broker]
) -> None:
    r, eid, broker = held
    (step,) = r.held_recoveries()
    b = browser
    open_page(b, world, "operator")
    card = b.page.locator(f'article.card[data-execution="{eid}"]')
    expect(card).to_have_attribute("data-state", "held")
    since = datetime.fromtimestamp(step.since_ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    expect(card.locator("p.held-step")).to_have_text(f"Held at release_account since {since}")
    expect(card.locator("button.decide")).to_have_count(0)  # no resume/fresh choice while held
    applied = card.get_by_role("button", name="Applied: release_account for seat eng-1", exact=True)
    expect(applied).to_be_visible()
    expect(
        card.get_by_role("button", name="Not applied: release_account for seat eng-1", exact=True)
    ).to_be_visible()
    b.shot("held-01-operator")

    applied.click()
    # The step is resolved by the observation (never re-sent), then the paused swarm waits for a decision.
    expect(card).to_have_attribute("data-state", "awaiting")
    expect(b.page.locator("#announce")).to_have_text(re.compile(r"^Answered Applied for seat eng-1"))
    assert r.held_recoveries() == []
    assert broker.applied[eid] == 1
    fence = json.loads(world.client.hget(r.keys.attempt_fences, eid) or b"{}")
    assert fence["released"] == ["grant", "account"] and fence["account_release"] == "reported"
    posted = [u for u, _ in b.requests if "/v1/recoveries/" in u]
    assert posted == [
        f"{world.url}/v1/recoveries/{step.call}/token",
        f"{world.url}/v1/recoveries/{step.call}/resume",
    ]
    b.shot("held-02-answered")
    assert not [m for m in b.console if m.startswith(("error", "pageerror"))], b.console


def test_a_master_sees_the_held_step_without_answers(
    world: World, browser: Browser, held: tuple[Recovery, str, Broker]
) -> None:
    _, eid, _ = held
    b = browser
    open_page(b, world, MASTER_A)
    card = b.page.locator(f'article.card[data-execution="{eid}"]')
    expect(card).to_have_attribute("data-state", "held")
    expect(card.locator("p.held-step")).to_have_text(re.compile(r"^Held at release_account since "))
    expect(card.locator("button")).to_have_count(0)
    expect(card.locator("p.hint")).to_have_text(re.compile(r"^Only the operator can answer a held step"))
