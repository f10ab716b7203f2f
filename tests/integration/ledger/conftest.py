"""A live control API (with the ledger page) over a real Redis and a real local checkpoint store.

``swarm-a`` has two seats and master ``master@example-1``; its second task's
text is HTML with script in it. ``swarm-b`` has one seat and master
``master@example-2``. Generation 1 of every seat is admitted and running and
holds a native session; tests fail attempts through real recovery passes
(``Recovery.reconcile`` with the observation the operator would make of a
failed Pod). The browser is Debian's Chromium driven by Playwright.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores.local import LocalStore
from agentihooks_operator.api import ApiState, SwarmRegistry
from agentihooks_operator.api.access.auth import sha256_hex
from agentihooks_operator.recovery import LaunchPlan, Recovery
from agentihooks_operator.swarm import SwarmSpec
from testsupport.checkpoints import BuiltCheckpoint, build_checkpoint
from testsupport.control_api import Secrets, live_api
from testsupport.recovery import MemoryLauncher, observe

MASTER_A = "master@example-1"
MASTER_B = "master@example-2"
HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script><b>bold</b> & "quotes"'
TEXTS = {"swarm-a": ["Write the release notes for 2.1", HOSTILE], "swarm-b": ["Triage the flaky tests"]}


def spec_of(texts: list[str], masters: dict[str, str]) -> SwarmSpec:
    return SwarmSpec.model_validate(
        {
            "image": "registry.example/worker:v1",
            "harness": {"name": "claude", "command": ["claude"]},
            "seats": [
                {
                    "name": f"eng-{i + 1}",
                    "project": "github.com/example/app",
                    "task": {"id": f"task-{i + 1}", "text": t},
                }
                for i, t in enumerate(texts)
            ],
            "masters": [{"agent": a, "credentialSecret": s} for a, s in masters.items()],
        }
    )


@dataclass
class World:
    url: str
    client: redis.Redis
    store: LocalStore
    store_root: Path
    launcher: MemoryLauncher
    registry: SwarmRegistry
    tmp: Path
    tokens: dict[str, str]
    recoveries: dict[str, Recovery] = field(default_factory=dict)
    specs: dict[str, SwarmSpec] = field(default_factory=dict)
    first: dict[str, list[LaunchPlan]] = field(default_factory=dict)
    built: int = 0

    def call(self, method: str, path: str, token: str | None = None, **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        with httpx.Client(base_url=self.url, headers=headers, timeout=30) as c:
            return c.request(method, path, **kw)

    def plan(self, seat: str, swarm: str = "swarm-a") -> LaunchPlan:
        return next(p for p in self.first[swarm] if p.seat == seat)

    def fail(self, *seats: str, swarm: str = "swarm-a", reason: str = "oom_killed") -> list[str]:
        """Fail the seats' generation-1 Pods with automation paused, so each waits for a decision."""
        r, spec = self.recoveries[swarm], self.specs[swarm]
        r.pause()
        plans = self.first[swarm]
        failed = {self.plan(s, swarm).execution_id: reason for s in seats}
        report = r.reconcile(spec, observe([(p.execution_id, p.seat, 1) for p in plans], failed=failed))
        assert sorted(report.fenced) == sorted(failed)
        return [self.plan(s, swarm).execution_id for s in seats]

    def checkpoint(self, execution_id: str, seat: str = "eng-1", *, kind: str = "claude") -> BuiltCheckpoint:
        self.built += 1
        kw: dict[str, Any] = {"session_id": "sess-1"} if kind != "context" else {}
        scope = StoreScope(swarm="swarm-a", task_id=f"task-{seat.split('-')[1]}", task_generation=1)
        return build_checkpoint(
            self.store,
            scope,
            self.tmp / f"ckpt-{self.built}",
            kind=kind,  # type: ignore[arg-type]
            checkpoint_id=f"ckpt-{self.built + 6}",
            sequence=self.built,
            execution_id=execution_id,
            compatibility_key="v1",
            **kw,
        )

    def drop_checkpoints(self) -> None:
        """Every checkpoint disappears from the store (what an operator's mistaken cleanup would do)."""
        shutil.rmtree(self.store_root)
        self.store_root.mkdir()

    def report(self, replacement: str) -> httpx.Response:
        """The replacement reports the continuity its directive named, with its own worker credential."""
        r = self.recoveries["swarm-a"]
        raw = self.client.hget(r.keys.attempt_records, replacement)
        assert raw, replacement
        import json

        directive = json.loads(raw)["directive"] or {"recovery": "fresh"}
        token = self.launcher.pods[replacement].worker_token.get_secret_value()
        return self.call(
            "POST",
            f"/v1/executions/{replacement}/outcome",
            token,
            json={"execution_id": replacement, **directive},
        )


@pytest.fixture
def world(redis_url: str, tmp_path: Path) -> Iterator[World]:
    client = redis.Redis.from_url(redis_url)
    root = tmp_path / "store"
    root.mkdir()
    store = LocalStore(root)
    launcher = MemoryLauncher()
    tokens = {
        "operator": "op-" + secrets.token_urlsafe(24),
        MASTER_A: "ma-" + secrets.token_urlsafe(24),
        MASTER_B: "mb-" + secrets.token_urlsafe(24),
    }
    registry = SwarmRegistry(Secrets({"master-a": tokens[MASTER_A], "master-b": tokens[MASTER_B]}))
    state = ApiState(
        registry=registry, redis=client, operator_hash=sha256_hex(tokens["operator"]), catalog=store
    )
    with live_api(state) as server:
        w = World(server.url, client, store, root, launcher, registry, tmp_path, tokens)
        for swarm, master, secret in (("swarm-a", MASTER_A, "master-a"), ("swarm-b", MASTER_B, "master-b")):
            spec = spec_of(TEXTS[swarm], {master: secret})
            r = Recovery(client, swarm, holder="ctl-a", catalog=store, launcher=launcher)
            w.first[swarm] = r.ensure_seats(spec)
            for plan in w.first[swarm]:
                r.report_session(plan.execution_id, "sess-1")
                r.report_watermark(plan.execution_id, 5)
            registry.publish(swarm, r, spec, holder="ctl-a")
            w.recoveries[swarm], w.specs[swarm] = r, spec
        yield w
    client.close()


# ---- the browser ------------------------------------------------------------------------------
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]
ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts" / "ledger"


@pytest.fixture(scope="module")
def browser_context() -> Iterator[Any]:
    """One headless Chromium per test module, with a fresh user-data dir (never ``playwright install``)."""
    if not CHROMIUM.exists():
        pytest.skip("/usr/bin/chromium is absent: install Debian's chromium package to run the browser tests")
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="ledger-chromium-")
    try:
        with sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                profile,
                executable_path=str(CHROMIUM),
                headless=True,
                args=CHROMIUM_ARGS,
                viewport={"width": 1200, "height": 860},
            )
            context.set_default_timeout(10_000)
            yield context
            context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@dataclass
class Browser:
    """One fresh tab, the console messages it logged and every request it sent."""

    page: Any
    console: list[str]
    requests: list[tuple[str, dict[str, str]]]

    def shot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path


@pytest.fixture
def browser(browser_context: Any) -> Iterator[Browser]:
    page = browser_context.new_page()
    console: list[str] = []
    requests: list[tuple[str, dict[str, str]]] = []
    page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
    page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
    page.on("request", lambda r: requests.append((r.url, dict(r.headers))))
    yield Browser(page, console, requests)
    page.close()
