"""Redis restarts (AOF on) and concurrent conflicting requests."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import redis
from agentihooks_checkpoint.directive import RestoreOutcome
from agentihooks_operator.recovery import NOT_PENDING, RecoveryRefused
from testsupport.recovery import dump_keys, observe


def test_redis_restart_mid_pass_loses_nothing_acknowledged(
    make, private_redis, spec, checkpoint, launcher
) -> None:  # type: ignore[no-untyped-def]
    client = redis.Redis.from_url(private_redis.url)
    r0 = make(client=client)
    eid = r0.ensure_seats(spec)[0].execution_id
    r0.report_session(eid, "sess-1")
    r0.report_watermark(eid, 3)
    built = checkpoint(eid, session_id="sess-1")
    restarts: list[str] = []

    def restart_redis(point: str) -> None:
        if point in ("after:release_grant", "after:launch"):
            restarts.append(point)
            private_redis.restart(kill=True)

    r = make(client=client, faults=restart_redis)
    report = r.reconcile(spec, observe([(eid, "eng-1", 1)], failed={eid: "oom_killed"}))
    assert restarts == ["after:release_grant", "after:launch"]
    new = report.decisions[0].replacement
    assert report.fenced == [eid] and report.launches == [new]
    m = r.metrics()
    assert m["fences_by_reason:oom_killed"] == 1 and m["releases:grant"] == 1
    assert m["releases:account"] == 1 and m["admissions:replacement"] == 1
    fence = json.loads(client.hget(r.keys.attempt_fences, eid))
    assert fence["archive_watermark"] == 3 and fence["released"] == ["grant", "account"]
    assert json.loads(client.hget(r.keys.attempt_journal, new))["launch"]["status"] == "ok"
    stored = r.report_outcome(
        new,
        RestoreOutcome.model_validate(
            {
                "execution_id": new,
                "recovery": "native",
                "checkpoint_id": built.checkpoint_id,
                "session_id": "sess-1",
                "watermark": built.watermark,
            }
        ),
    )
    r.pause()
    before = dump_keys(client)
    private_redis.restart(kill=True)
    assert dump_keys(client) == before, "every acknowledged write survived the restart"
    after = make(client=client)
    assert after.paused() is True
    assert (
        after.report_outcome(
            new,
            RestoreOutcome.model_validate(
                stored.model_dump(
                    include={"execution_id", "recovery", "checkpoint_id", "session_id", "watermark"}
                )
            ),
        )
        == stored
    )
    client.close()


def test_fifty_concurrent_conflicting_decisions_accept_exactly_one(make, client, spec, launcher) -> None:  # type: ignore[no-untyped-def]
    r = make()
    eid = r.ensure_seats(spec)[0].execution_id
    r.pause()
    r.reconcile(spec, observe([(eid, "eng-1", 1)], failed={eid: "oom_killed"}))
    # No checkpoint: resume requests are refused for want of one; fresh ones race each other.
    start = threading.Barrier(50)

    def one(i: int) -> str:
        choice = "fresh" if i % 2 == 0 else "resume"
        start.wait()
        try:
            d = r.decide(eid, choice, f"master-{i}", spec=spec)  # type: ignore[arg-type]
        except RecoveryRefused as e:
            return f"refused:{e.message}"
        return "replayed" if d.replayed else f"accepted:{d.replacement}"

    with ThreadPoolExecutor(50) as pool:
        results = list(pool.map(one, range(50)))
    accepted = [x for x in results if x.startswith("accepted:")]
    assert len(accepted) == 1
    new = accepted[0].split(":", 1)[1]
    assert all(
        x in ("replayed", f"refused:{NOT_PENDING}") or x.startswith("refused:no complete")
        for x in results
        if x not in accepted
    )
    assert client.hlen(r.keys.attempt_recoveries) == 1
    assert r.metrics()["admissions:replacement"] == 1
    assert launcher.created[new] == 1 and client.hlen(r.keys.attempt_records) == 2


def test_fifty_concurrent_conflicting_decisions_with_a_checkpoint(
    make, client, spec, checkpoint, launcher
) -> None:  # type: ignore[no-untyped-def]
    r = make()
    eid = r.ensure_seats(spec)[0].execution_id
    r.report_session(eid, "sess-1")
    r.pause()
    r.reconcile(spec, observe([(eid, "eng-1", 1)], failed={eid: "oom_killed"}))
    checkpoint(eid, session_id="sess-1")
    start = threading.Barrier(50)
    outcomes: list[tuple[str, str]] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        choice = "fresh" if i % 2 == 0 else "resume"
        start.wait()
        try:
            d = r.decide(eid, choice, "operator", spec=spec)  # type: ignore[arg-type]
            kind = "replayed" if d.replayed else "accepted"
        except RecoveryRefused as e:
            kind = e.message
        with lock:
            outcomes.append((choice, kind))

    with ThreadPoolExecutor(50) as pool:
        list(pool.map(one, range(50)))
    accepted = [c for c, k in outcomes if k == "accepted"]
    assert len(accepted) == 1
    winner = accepted[0]
    for choice, kind in outcomes:
        if kind == "accepted":
            continue
        assert kind == ("replayed" if choice == winner else NOT_PENDING)
    assert r.metrics()["admissions:replacement"] == 1
    assert sum(1 for c in launcher.calls if c[0] == "launch") == 2  # generation 1 + one replacement


def test_fifty_concurrent_recorded_requests_yield_one_decision(make, client, spec, launcher) -> None:  # type: ignore[no-untyped-def]
    r = make()
    eid = r.ensure_seats(spec)[0].execution_id
    r.pause()
    r.reconcile(spec, observe([(eid, "eng-1", 1)], failed={eid: "oom_killed"}))
    start = threading.Barrier(50)

    def one(i: int) -> bool:
        start.wait()
        return r.record_request(eid, "fresh" if i % 2 else "resume", f"master-{i}")  # type: ignore[arg-type]

    with ThreadPoolExecutor(50) as pool:
        stored = list(pool.map(one, range(50)))
    assert stored.count(True) == 2, "deduplicated by attempt and choice"
    report = r.reconcile(spec, [])
    assert [d.mode for d in report.decisions] == ["fresh"]
    assert client.hlen(r.keys.recovery_requests) == 0
    assert r.metrics()["admissions:replacement"] == 1


def test_api_thread_and_pass_never_launch_one_replacement_twice(make, client, spec, launcher) -> None:  # type: ignore[no-untyped-def]
    entered, release = threading.Event(), threading.Event()
    original = launcher.launch
    first = [True]

    def slow_launch(plan):  # type: ignore[no-untyped-def]
        if plan.generation == 2 and first[0]:
            first[0] = False
            entered.set()
            assert release.wait(10)
        return original(plan)

    original_exists = launcher.exists

    def exists(execution_id: str) -> bool:
        # Without the per-attempt lock the pass gets here while the API thread is mid-launch.
        answer = original_exists(execution_id)
        release.set()
        return answer

    launcher.launch = slow_launch
    launcher.exists = exists
    r = make()
    eid = r.ensure_seats(spec)[0].execution_id
    r.pause()
    r.reconcile(spec, observe([(eid, "eng-1", 1)], failed={eid: "oom_killed"}))
    with ThreadPoolExecutor(2) as pool:
        api = pool.submit(r.decide, eid, "fresh", "operator", spec=spec)
        assert entered.wait(10)
        passing = pool.submit(r.reconcile, spec, [])  # sees the replacement's launch as open work
        # With the lock the pass waits for the API thread instead; let that one go on after a moment.
        timer = threading.Timer(0.5, release.set)
        timer.start()
        d = api.result(10)
        passing.result(10)
        timer.cancel()
    new = d.replacement
    assert launcher.calls.count(("launch", new)) == 1
    assert r.check_worker_credential(new, launcher.pods[new].worker_token.get_secret_value())
