"""A real Prometheus scrapes the real operator's control API, runs the chart's alerts, and answers every
query of the chart's Grafana dashboard with data.

The operator runs as its own process (kopf, the control API, real Redis) on the real control plane,
the simulated kubelet plays the Pods. Debian's Prometheus scrapes ``/metrics`` every second (it asks
for OpenMetrics, and gets it) with the chart's rendered PrometheusRule loaded. The test then makes
every condition the dashboard shows happen: a seat is OOM-killed and waits for a decision (the
``AgentihooksSeatAwaitingDecision`` alert fires), the operator chooses fresh and a replacement is
created (a failover), a contradicting choice is refused, the replacement reports its outcome and its
restore, another worker reports a refused restore (``AgentihooksRestoreRefused`` fires). Every
dashboard query is evaluated through Prometheus's HTTP API and must answer with a number.
"""

from __future__ import annotations

import asyncio
import base64
import math
import secrets
from pathlib import Path
from typing import Any

import httpx
import pytest
from testsupport import kubelet as kl
from testsupport.helm import Helm
from testsupport.kube import eventually, operator_process
from testsupport.node import RealKubelet
from testsupport.prometheus import chart_rules, dashboard, dashboard_queries, free_port, prometheus_server
from testsupport.realcluster import RealCluster

pytestmark = pytest.mark.slow
NODE = "kind-worker"
SWARM = "metrics"


def spec() -> dict[str, Any]:
    return {
        "image": "ghcr.io/agentihooks/worker:2.1.0",
        "harness": {"name": "claude", "command": ["claude", "-p", "work"]},
        "seats": [
            {
                "name": f"eng-{i}",
                "project": "github.com/acme/app",
                "task": {"id": f"t-{i}", "text": f"task {i}"},
            }
            for i in (1, 2)
        ],
        "recovery": {"automation": True, "passIntervalSeconds": 0.5},
    }


def gen(pod: dict[str, Any]) -> int:
    return int(pod["metadata"]["labels"]["swarm.agentihooks.io/generation"])


def eid(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["labels"]["swarm.agentihooks.io/execution-id"])


async def test_prometheus_scrapes_the_operator_and_every_dashboard_query_has_data(
    real_cluster: RealCluster,
    real_kubelet: RealKubelet,
    session_helm: Helm,
    redis_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster, kubelet = real_cluster, real_kubelet
    port = free_port()
    operator_token = secrets.token_urlsafe(24)
    monkeypatch.setenv("AGENTIHOOKS_CONTROL_HOST", "127.0.0.1")
    monkeypatch.setenv("AGENTIHOOKS_CONTROL_PORT", str(port))
    monkeypatch.setenv("AGENTIHOOKS_OPERATOR_TOKEN", operator_token)
    # the chart's rules, with a short wait for a decision so the alert fires within the test
    values = {"prometheusRule": {"enabled": True, "awaitingDecisionFor": "2s", "unavailableFor": "10s"}}
    rules = chart_rules(session_helm.render(values))
    await cluster.create_swarm(SWARM, spec())
    url = f"http://127.0.0.1:{port}"
    operator = {"Authorization": f"Bearer {operator_token}"}

    async with (
        operator_process(cluster, redis_url, tmp_path, operator_id="op-prom"),
        httpx.AsyncClient(base_url=url, timeout=10) as api,
    ):
        with prometheus_server(tmp_path / "prometheus", [f"127.0.0.1:{port}"], rules=rules) as prom:

            async def query(expr: str) -> list[dict[str, Any]]:
                return await asyncio.to_thread(prom.query, expr)

            async def alert(name: str, **labels: str) -> bool:
                found = (await asyncio.to_thread(prom.get, "/api/v1/alerts"))["alerts"]
                return any(
                    a["labels"]["alertname"] == name
                    and a["state"] == "firing"
                    and all(a["labels"].get(k) == v for k, v in labels.items())
                    for a in found
                )

            async def pod_of(generation: int, task: str) -> dict[str, Any] | None:
                pods = await cluster.pods(SWARM)
                return next(
                    (
                        p
                        for p in pods
                        if gen(p) == generation
                        and p["metadata"]["labels"].get("swarm.agentihooks.io/task") == task
                    ),
                    None,
                )

            async def worker_token(execution_id: str) -> str:
                secret = await cluster.get(
                    f"/api/v1/namespaces/{cluster.namespace}/secrets/swarm-{execution_id}-credential"
                )
                assert secret is not None
                return base64.b64decode(secret["data"]["token"]).decode()

            await kubelet.put_node(NODE)
            first = await eventually(lambda: pod_of(1, "t-1"), timeout=60, what="eng-1's Pod")
            other = await eventually(lambda: pod_of(1, "t-2"), timeout=60, what="eng-2's Pod")
            for pod in (first, other):
                await kubelet.set_status(pod["metadata"]["name"], kl.running(), node_name=NODE)
            await eventually(
                lambda: query(f'agentihooks_lease_held{{swarm="{SWARM}"}} == 1'), timeout=60, what="scraped"
            )

            # eng-1 is OOM-killed: no checkpoint, so the seat waits for a decision
            await kubelet.set_status(first["metadata"]["name"], kl.oom_killed())
            await eventually(
                lambda: alert("AgentihooksSeatAwaitingDecision", swarm=SWARM),
                timeout=60,
                what="the awaiting-decision alert firing",
            )
            lost = eid(first)
            r = await api.post(
                f"/v1/executions/{lost}/restore-decision",
                json={"choice": "fresh", "agent": "operator"},
                headers=operator,
            )
            assert r.status_code == 200, r.text
            replacement = r.json()["replacement"]
            refused = await api.post(
                f"/v1/executions/{lost}/restore-decision",
                json={"choice": "resume", "agent": "operator"},
                headers=operator,
            )
            assert refused.status_code == 409 and refused.json()["error"] == "not_pending"

            # the replacement reports its outcome and its restore; eng-2's worker reports a refusal
            token = await worker_token(replacement)
            worker = {"Authorization": f"Bearer {token}"}
            r = await api.post(
                f"/v1/executions/{replacement}/outcome",
                json={"execution_id": replacement, "recovery": "fresh"},
                headers=worker,
            )
            assert r.status_code == 200, r.text
            r = await api.post(
                f"/v1/executions/{replacement}/restore-report",
                json={"result": "fresh", "restore_seconds": 3.2},
                headers=worker,
            )
            assert r.status_code == 200, r.text
            r = await api.post(
                f"/v1/executions/{eid(other)}/restore-report",
                json={"result": "refused", "reason": "corrupt_object", "restore_seconds": 1.5},
                headers={"Authorization": f"Bearer {await worker_token(eid(other))}"},
            )
            assert r.status_code == 200, r.text
            await eventually(
                lambda: alert("AgentihooksRestoreRefused", swarm=SWARM, type="refused/corrupt_object"),
                timeout=60,
                what="the restore-refused alert firing",
            )

            # every query of the dashboard answers with a number (a quantile of a label set that has
            # seen nothing yet, e.g. failovers decided by a master, is NaN beside it: Grafana leaves it out)
            async def answered(expr: str) -> list[dict[str, Any]] | None:
                result = await query(expr)
                return result if any(math.isfinite(float(s["value"][1])) for s in result) else None

            for title, ref, expr in dashboard_queries():
                await eventually(
                    lambda e=expr: answered(e), timeout=60, what=f"data for {title} {ref}: {expr}"
                )
            # the namespace and swarm variables' values
            swarms = await asyncio.to_thread(
                prom.get, "/api/v1/label/swarm/values?match[]=agentihooks_lease_held"
            )
            assert SWARM in swarms
            namespaces = await asyncio.to_thread(
                prom.get, "/api/v1/label/namespace/values?match[]=agentihooks_lease_held"
            )
            assert cluster.namespace in namespaces
            variables = [v["name"] for v in dashboard()["templating"]["list"]]
            assert variables == ["datasource", "namespace", "swarm"]

            # what the figures say
            [awaiting] = await query(f'sum(agentihooks_seats_awaiting_decision{{swarm="{SWARM}"}})')
            assert float(awaiting["value"][1]) == 0
            [latency] = await query(
                f'sum by (decider) (agentihooks_failover_latency_seconds_count{{swarm="{SWARM}"}}) > 0'
            )
            assert latency["metric"]["decider"] == "operator" and float(latency["value"][1]) == 1
            [fresh] = await query(f'agentihooks_restore_outcomes_total{{swarm="{SWARM}",type="fresh"}}')
            assert float(fresh["value"][1]) == 1
            [spec_name] = await query(f'agentihooks_restore_outcomes_by_type{{swarm="{SWARM}",type="fresh"}}')
            assert float(spec_name["value"][1]) == 1
            assert not await alert("AgentihooksNoLeader") and not await alert("AgentihooksRedisUnavailable")
            # Prometheus asked for OpenMetrics and got it: its metadata has the OpenMetrics types
            meta = await asyncio.to_thread(prom.get, "/api/v1/metadata")
            assert meta["agentihooks_build"][0]["type"] == "info"
            assert meta["agentihooks_restore_outcomes_by_type"][0]["type"] == "unknown"
            assert meta["agentihooks_fences"][0]["type"] == "counter"
            rule_health = (await asyncio.to_thread(prom.get, "/api/v1/rules"))["groups"]
            assert all(rule["health"] == "ok" for g in rule_health for rule in g["rules"]), rule_health
