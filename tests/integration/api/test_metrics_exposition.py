"""``/metrics`` of the live control API over real Redis: formats by ``Accept``, swarm-global figures
exported once over two replicas, the workers' restore reports, and the failover latency.

Every exposition is parsed back with prometheus_client's parsers: the OpenMetrics parser for what a
Prometheus server asking for OpenMetrics gets, the classic parser otherwise.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import redis
from agentihooks_operator.api import ApiState, SwarmRegistry
from agentihooks_operator.api.metrics import GLOBAL
from agentihooks_operator.instruments import OperatorMetrics, TimedLauncher
from agentihooks_operator.recovery import Recovery
from agentihooks_operator.recovery.store.clock import RedisClock
from agentihooks_operator.recovery.store.keys import SwarmKeys
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text
from testsupport.control_api import MASTER_A, World, live_api
from testsupport.recovery import MemoryLauncher, observe, swarm_spec
from testsupport.scrape import OPENMETRICS, scrape, value


def test_openmetrics_when_asked_and_the_text_format_otherwise(world: World) -> None:
    r = httpx.get(world.url + "/metrics", headers={"Accept": OPENMETRICS})
    assert r.headers["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")
    assert r.headers["Vary"] == "Accept"
    names = {f.name: f.type for f in parse_openmetrics(r.text)}
    assert names["agentihooks_fences"] == "counter" and names["agentihooks_build"] == "info"
    plain = httpx.get(world.url + "/metrics")
    assert plain.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert {f.name for f in parse_text(plain.text)} >= {"agentihooks_fences", "agentihooks_build_info"}
    for token in world.tokens.values():
        assert token not in r.text and token not in plain.text


def test_swarm_global_figures_are_exported_once_over_two_replicas(world: World, redis_url: str) -> None:
    """A second replica serves the same swarms without their leases: it exports its own per-replica
    figures and none of the swarm-global ones, so a sum over both replicas is each swarm's figure."""
    eid = world.fail()
    world.recoveries["swarm-a"].decide(eid, "fresh", "operator", spec=world.specs["swarm-a"])
    client = redis.Redis.from_url(redis_url)
    registry = SwarmRegistry()
    for swarm, spec in world.specs.items():
        standby = Recovery(
            client, swarm, holder="ctl-b", catalog=world.store, launcher=MemoryLauncher(), namespace="default"
        )
        assert not standby.acquire()  # ctl-a holds it
        registry.publish(swarm, standby, spec, holder="ctl-b")
    state = ApiState(registry=registry, redis=client)
    with live_api(state) as other:
        a, b = scrape(world.url), scrape(other.url)
    client.close()
    assert value(a, "agentihooks_lease_held", swarm="swarm-a") == 1
    assert value(b, "agentihooks_lease_held", swarm="swarm-a") == 0
    assert not {name for name, _ in b} & GLOBAL
    fences = sum(v for (name, labels), v in {**a, **b}.items() if name == "agentihooks_fences_total")
    assert fences == world.recoveries["swarm-a"].metrics()["fences_by_reason:oom_killed"] == 1
    assert value(a, "agentihooks_decisions_by_decider_total", swarm="swarm-a", decider="operator") == 1
    assert value(a, "agentihooks_restore_outcomes_total", swarm="swarm-b", type="fresh") == 0
    assert value(b, "agentihooks_redis_up") == 1 and value(
        b, "agentihooks_build_info", version=OperatorMetrics().version
    )


def test_a_worker_reports_its_restore_once_and_only_with_its_own_credential(world: World) -> None:
    mine = world.first["swarm-a"].execution_id
    token = world.worker_token(mine)
    other = world.worker_token(world.first["swarm-b"].execution_id)
    path = f"/v1/executions/{mine}/restore-report"
    body = {"result": "refused", "reason": "corrupt_object", "restore_seconds": 1.25}
    assert world.call("POST", path, token, json=body).json() == {"accepted": True}
    assert world.call("POST", path, token, json=body).status_code == 200  # a retry: answered, not counted
    assert world.call("POST", path, other, json=body).status_code == 403
    assert world.call("POST", path, world.tokens["operator"], json=body).status_code == 403
    assert world.call("POST", path, world.tokens[MASTER_A], json=body).status_code == 403
    assert world.call("POST", path, None, json=body).status_code == 401
    assert world.call("POST", path, token, json={"result": "great"}).status_code == 400
    assert world.call("POST", path, token, json={**body, "token": "x"}).status_code == 400
    assert world.call("POST", path, token, json={**body, "restore_seconds": -1}).status_code == 400
    assert world.call("POST", path, token, json={**body, "reason": "Not A Word"}).status_code == 400
    samples = scrape(world.url)
    assert (
        value(
            samples,
            "agentihooks_worker_restore_outcomes_total",
            swarm="swarm-a",
            type="refused/corrupt_object",
        )
        == 1
    )
    assert value(samples, "agentihooks_restore_duration_seconds_count", swarm="swarm-a", type="refused") == 1
    assert value(samples, "agentihooks_restore_duration_seconds_sum", swarm="swarm-a", type="refused") == 1.25


def test_failover_latency_runs_from_the_fence_to_the_replacement_created(
    redis_url: str, tmp_path: Path
) -> None:
    client = redis.Redis.from_url(redis_url)
    metrics = OperatorMetrics(process=False)
    inner = MemoryLauncher()
    swarm = "swarm-latency"
    launcher = TimedLauncher(
        inner,
        metrics=metrics,
        client=client,
        keys=SwarmKeys("agentihooks", swarm, "default"),
        clock=RedisClock(client),
    )
    from agentihooks_checkpoint.stores.local import LocalStore

    r = Recovery(
        client, swarm, holder="ctl-a", catalog=LocalStore(tmp_path), launcher=launcher, namespace="default"
    )
    spec = swarm_spec()
    first = r.ensure_seats(spec)[0]
    assert (
        metrics.registry.get_sample_value(
            "agentihooks_failover_latency_seconds_count",
            {"namespace": "default", "swarm": swarm, "decider": "operator"},
        )
        is None
    ), "a first launch is no failover"
    r.pause()
    r.reconcile(spec, observe([(first.execution_id, "eng-1", 1)], failed={first.execution_id: "oom_killed"}))
    time.sleep(0.3)  # the seat waits for a decision
    decision = r.decide(first.execution_id, "fresh", "operator", spec=spec)
    assert decision.replacement in inner.pods
    r.decide(
        first.execution_id, "fresh", "operator", spec=spec
    )  # replayed: nothing created, nothing observed
    labels = {"namespace": "default", "swarm": swarm, "decider": "operator"}
    assert metrics.registry.get_sample_value("agentihooks_failover_latency_seconds_count", labels) == 1
    seconds = metrics.registry.get_sample_value("agentihooks_failover_latency_seconds_sum", labels)
    assert seconds is not None and seconds >= 0.3
    client.close()


def test_redis_down_answers_200_with_redis_up_zero(world: World) -> None:
    dead = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.5)
    state = ApiState(registry=world.registry, redis=dead)
    with live_api(state) as server:
        samples = scrape(server.url)
    assert value(samples, "agentihooks_redis_up") == 0
    assert not {name for name, _ in samples} & GLOBAL
    assert value(samples, "agentihooks_lease_takeovers_total", swarm="swarm-a") == 1
