"""A real Prometheus for tests: Debian's ``prometheus`` package (server and ``promtool``).

scripts/install-deps.sh installs it (``apt-get install prometheus``; Debian 12 ships 2.42). Without
it the tests that need it skip with the reason, except under CI (``CI=true``), where they fail.

:class:`PrometheusServer` runs the server as a process on loopback with a temporary configuration
and data folder, scraping the given targets every second; :func:`dashboard_queries` and
:func:`chart_rules` read what the chart ships: the Grafana dashboard's queries and the
PrometheusRule's rule groups.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "charts" / "agentihooks-recovery" / "dashboards" / "agentihooks-recovery.json"
#: What Grafana would put in place of the dashboard's variables when the test evaluates its queries.
VARIABLES = {
    "$__rate_interval": "5m",
    "$__range": "15m",
    "$__interval": "15s",
    "$namespace": ".*",
    "$swarm": ".*",
}


def binary(name: str) -> Path:
    """``prometheus`` or ``promtool`` from PATH, or skip (fail under CI) saying how to install it."""
    found = shutil.which(name)
    if found:
        return Path(found)
    reason = f"{name} not found: apt-get install prometheus (scripts/install-deps.sh)"
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def chart_rules(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The rule groups of the rendered PrometheusRule, as a Prometheus rule file."""
    [rule] = [d for d in docs if d.get("kind") == "PrometheusRule"]
    return {"groups": rule["spec"]["groups"]}


def dashboard() -> dict[str, Any]:
    return dict(json.loads(DASHBOARD.read_text()))


def dashboard_queries() -> list[tuple[str, str, str]]:
    """``(panel title, refId, expr with the variables put in)`` for every query of the dashboard."""
    out = []
    for panel in dashboard()["panels"]:
        for target in panel.get("targets", []):
            expr = str(target["expr"])
            for name in sorted(VARIABLES, key=len, reverse=True):
                expr = expr.replace(name, VARIABLES[name])
            out.append((str(panel["title"]), str(target["refId"]), expr))
    return out


@dataclass
class PrometheusServer:
    url: str
    proc: subprocess.Popen[bytes]
    log: Path

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query through the HTTP API; the result vector (or fails with Prometheus's error)."""
        r = httpx.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10)
        body = r.json()
        assert r.status_code == 200 and body["status"] == "success", f"{expr}: {body}"
        result = body["data"]["result"]
        if body["data"]["resultType"] == "scalar":
            return [{"metric": {}, "value": result}]
        return list(result)

    def get(self, path: str) -> Any:
        r = httpx.get(f"{self.url}{path}", timeout=10)
        r.raise_for_status()
        return r.json()["data"]


@contextmanager
def prometheus_server(
    workdir: Path, targets: list[str], *, rules: dict[str, Any] | None = None, timeout: float = 60.0
) -> Iterator[PrometheusServer]:
    """Prometheus on a free loopback port scraping ``targets`` (``host:port``) every second, with
    ``rules`` evaluated every second; stopped (and its data thrown away) when the block ends."""
    exe = binary("prometheus")
    workdir.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{"job_name": "agentihooks", "static_configs": [{"targets": targets}]}],
    }
    if rules is not None:
        (workdir / "rules.yaml").write_text(yaml.safe_dump(rules, sort_keys=False))
        config["rule_files"] = [str(workdir / "rules.yaml")]
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    port = free_port()
    log = workdir / "prometheus.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [
                str(exe),
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--storage.tsdb.retention.time=1h",
                "--log.level=warn",
            ],
            stdout=out,
            stderr=out,
        )
    server = PrometheusServer(f"http://127.0.0.1:{port}", proc, log)
    try:
        deadline = time.monotonic() + timeout
        while True:
            assert proc.poll() is None, f"prometheus exited: {log.read_text()[-2000:]}"
            try:
                if httpx.get(f"{server.url}/-/ready", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "prometheus never became ready"
            time.sleep(0.2)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


#: The Prometheus Operator's PrometheusRule CRD (monitoring.coreos.com/v1), reduced to what the chart
#: writes, typed as upstream types it (``for`` as a duration, ``expr`` int-or-string).
DURATION = "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
PROMETHEUS_RULE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["spec"],
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "properties": {
                "groups": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "interval": {"type": "string", "pattern": DURATION},
                            "partial_response_strategy": {"type": "string"},
                            "limit": {"type": "integer"},
                            "rules": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "required": ["expr"],
                                    "properties": {
                                        "alert": {"type": "string"},
                                        "record": {"type": "string"},
                                        "expr": {"x-kubernetes-int-or-string": True},
                                        "for": {"type": "string", "pattern": DURATION},
                                        "keep_firing_for": {"type": "string", "pattern": DURATION},
                                        "labels": {
                                            "type": "object",
                                            "additionalProperties": {"type": "string"},
                                        },
                                        "annotations": {
                                            "type": "object",
                                            "additionalProperties": {"type": "string"},
                                        },
                                    },
                                },
                            },
                        },
                    },
                }
            },
        },
    },
}
PROMETHEUS_RULE_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "prometheusrules.monitoring.coreos.com"},
    "spec": {
        "group": "monitoring.coreos.com",
        "names": {
            "kind": "PrometheusRule",
            "listKind": "PrometheusRuleList",
            "plural": "prometheusrules",
            "singular": "prometheusrule",
            "categories": ["prometheus-operator"],
            "shortNames": ["promrule"],
        },
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": PROMETHEUS_RULE_SCHEMA},
            }
        ],
    },
}
