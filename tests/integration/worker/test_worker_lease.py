"""The worker lease end to end: a real boot, the real control API and Redis, a real fault proxy.

* A fenced attempt's worker, still reaching its controller, stops its agent at its next renewal
  (exit 77), and nothing is captured for it after the fence.
* A worker cut off from every replica (a partition: the proxy holds every byte, connections stay
  open) keeps its agent through a short outage, and stops it by its deadline in a long one (exit 76),
  before the controller's view of its lease has run out. Once the controller is back, that exit is
  a proven death: replaced at once, natively from the attempt's last capture, with no decision.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_operator.recovery.store.records import FenceRecord, Heartbeat
from agentihooks_worker.errors import EXIT_FENCED, EXIT_LEASE_EXPIRED
from testsupport import faultproxy
from testsupport.control_api import World, make_world
from testsupport.recovery import observe

from .conftest import events, harness_runs
from .test_boot_remote import replacement_boot

SCOPE = StoreScope(swarm="swarm-a", task_id="task-1", task_generation=1, namespace="default")
LEASE_SECONDS = 15.0


def _with_lease(tmp_path: Path, control_url: str | None = None) -> None:
    path = tmp_path / "launch.json"
    launch = json.loads(path.read_text())
    launch["worker_lease_seconds"] = LEASE_SECONDS
    if control_url is not None:
        launch["control_url"] = control_url
    path.write_text(json.dumps(launch))


def _redis_ms(w: World) -> int:
    sec, usec = w.client.time()
    return int(sec) * 1000 + int(usec) // 1000


def _when_started(tmp_path: Path, then: object) -> threading.Thread:
    """Run ``then`` in a thread once the harness has started (its first run is logged)."""
    assert callable(then)

    def wait_and_run() -> None:
        deadline = time.monotonic() + 120
        while not harness_runs(tmp_path):
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)
        then()

    t = threading.Thread(target=wait_and_run, daemon=True)
    t.start()
    return t


def test_a_fenced_worker_stops_its_agent_and_captures_nothing_more(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTIHOOKS_CHECKPOINT_REMOTE", "false")
    (tmp_path / "world").mkdir()
    with make_world(redis_url, tmp_path / "world") as w:
        boot, new, _ = replacement_boot(w, tmp_path)
        _with_lease(tmp_path)
        boot.environ = {
            **(boot.environ or {}),
            "FAKE_HARNESS_RUN_SECONDS": "forever",
            "FAKE_HARNESS_TICK": "0.2",
        }
        r, spec = w.recoveries["swarm-a"], w.specs["swarm-a"]
        token = w.worker_token(new)
        fenced_at: list[int] = []

        def fence() -> None:  # its Pod's deletion was lost: the controller fenced it, the worker runs on
            r.reconcile(spec, observe([(new, "eng-1", 2)], failed={new: "node_lost"}))
            fenced_at.append(_redis_ms(w))

        t = _when_started(tmp_path, fence)
        assert boot.run() == EXIT_FENCED
        t.join(timeout=30)
        assert fenced_at
        err = capsys.readouterr().err
        stopped = events(err, "agent_stopped")
        assert len(stopped) == 1 and stopped[0]["reason"] == "fenced"
        assert events(err, "harness_exited") == []
        mine = w.store.list_checkpoints(SCOPE, execution_id=new)
        assert len(mine) == 1  # the initial capture only: no periodic or final one after the fence
        assert token not in err


@pytest.mark.skipif(faultproxy.unavailable() is not None, reason=str(faultproxy.unavailable()))
def test_a_cut_off_worker_rides_out_a_short_outage_and_stops_in_a_long_one(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTIHOOKS_CHECKPOINT_REMOTE", "false")
    (tmp_path / "world").mkdir()
    proxy = faultproxy.FaultProxy(tmp_path / "proxy")
    proxy.start()
    try:
        with make_world(redis_url, tmp_path / "world") as w:
            port = proxy.add("control", int(urlparse(w.url).port or 0))
            boot, new, _ = replacement_boot(w, tmp_path)
            _with_lease(tmp_path, f"http://127.0.0.1:{port}")
            boot.environ = {**(boot.environ or {}), "FAKE_HARNESS_RUN_SECONDS": "forever"}
            key = w.recoveries["swarm-a"].keys.heartbeats
            renewals: list[int] = []

            def outages() -> None:
                proxy.cut("control")  # shorter than the lease less the stop budget: nothing stops
                time.sleep(LEASE_SECONDS / 3)
                proxy.heal("control")
                deadline = time.monotonic() + 60
                while True:  # a renewal after the heal, then the long outage
                    hb = Heartbeat.model_validate_json(w.client.hget(key, new) or b"{}")
                    if hb.lease_at_ms is not None and (not renewals or hb.lease_at_ms > renewals[0]):
                        renewals.append(hb.lease_at_ms)
                    if len(renewals) >= 2 or time.monotonic() > deadline:
                        break
                    time.sleep(0.1)
                proxy.cut("control")

            t = _when_started(tmp_path, outages)
            code = boot.run()
            ended = _redis_ms(w)
            t.join(timeout=60)
            assert code == EXIT_LEASE_EXPIRED
            assert len(renewals) >= 2, "the worker renewed again after the short outage"
            hb = Heartbeat.model_validate_json(w.client.hget(key, new) or b"{}")
            assert hb.lease_at_ms is not None
            # the harness was gone (boot.run returns after it) before its lease (the launch record's),
            # counted from the controller's stamp of the last renewal, could have run out
            assert ended <= hb.lease_at_ms + LEASE_SECONDS * 1000
            err = capsys.readouterr().err
            stopped = events(err, "agent_stopped")
            assert len(stopped) == 1 and stopped[0]["reason"] == "lease_expired"

            # The controller back: the worker's exit (76) is a proven death, replaced at once, and
            # natively from the attempt's last capture, with no decision from anyone.
            proxy.heal("control")
            r, spec = w.recoveries["swarm-a"], w.specs["swarm-a"]
            assert r.acquire()  # its swarm lease ran out while nobody renewed it: taken again
            r.unpause()
            report = r.reconcile(spec, observe([(new, "eng-1", 2)], failed={new: "application_exit"}))
            assert new in report.fenced
            raw = w.client.hget(r.keys.attempt_fences, new)
            assert raw is not None and FenceRecord.model_validate_json(raw).old_attempt_stops_by_ms is None
            decided = report.decisions[0]
            assert decided.mode == "resume" and decided.directive is not None
            assert decided.directive.recovery.value == "native"
            assert decided.checkpoint == w.store.list_checkpoints(SCOPE, execution_id=new)[-1].checkpoint_id
            assert decided.replacement in w.launcher.pods
    finally:
        proxy.stop()
