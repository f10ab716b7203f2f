"""The chart's PrometheusRule and Grafana dashboard, checked with Prometheus's own ``promtool``.

The rules are rendered by the pinned helm (``prometheusRule.enabled=true``), then:

* ``promtool check rules`` accepts them (and refuses a broken copy: the check is real);
* ``promtool test rules`` runs a unit test of every alert with input series: it fires when its
  condition holds for its ``for`` and not otherwise, with the labels and annotations it promises;
* the PrometheusRule has the Prometheus Operator's shape (``monitoring.coreos.com/v1``, ``spec.groups``)
  against the CRD's schema (the real API server checks it too: test_helm_install_real.py).

The dashboard ConfigMap carries the sidecar's label and the dashboard JSON, whose queries a real
Prometheus evaluates in tests/integration/api/test_prometheus_scrape.py.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from testsupport.helm import NAMESPACE, Helm, by_kind, one
from testsupport.prometheus import DASHBOARD, PROMETHEUS_RULE_SCHEMA, binary, chart_rules, dashboard

ALERTS = {
    "AgentihooksSeatAwaitingDecision",
    "AgentihooksRestoreRefused",
    "AgentihooksRestoreRequestsRefused",
    "AgentihooksLeaseChurn",
    "AgentihooksRedisUnavailable",
    "AgentihooksNoLeader",
    "AgentihooksOperatorDown",
}


@pytest.fixture(scope="module")
def rendered(helm: Helm) -> list[dict[str, Any]]:
    return helm.render({"prometheusRule": {"enabled": True}, "grafanaDashboard": {"enabled": True}})


@pytest.fixture(scope="module")
def rules(rendered: list[dict[str, Any]]) -> dict[str, Any]:
    return chart_rules(rendered)


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(binary("promtool")), *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def test_promtool_checks_the_rendered_rules(rules: dict[str, Any], tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules))
    res = promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in res.stdout + res.stderr
    broken = json.loads(json.dumps(rules))
    broken["groups"][0]["rules"][0]["expr"] = "sum by (swarm (agentihooks_lease_held)"
    (tmp_path / "broken.yaml").write_text(yaml.safe_dump(broken))
    assert promtool("check", "rules", "broken.yaml", cwd=tmp_path).returncode != 0


def test_the_rule_is_a_prometheus_operator_prometheusrule(rendered: list[dict[str, Any]]) -> None:
    rule = one(rendered, "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["namespace"] == NAMESPACE
    jsonschema.Draft7Validator(PROMETHEUS_RULE_SCHEMA).validate(rule)
    names = [r["alert"] for g in rule["spec"]["groups"] for r in g["rules"]]
    assert set(names) == ALERTS and len(names) == len(ALERTS)
    for r in (r for g in rule["spec"]["groups"] for r in g["rules"]):
        assert r["labels"]["severity"] in ("info", "warning", "critical")
        assert r["annotations"]["summary"] and r["annotations"]["description"]


def test_both_are_opt_in(helm: Helm) -> None:
    docs = helm.render()
    assert not by_kind(docs, "PrometheusRule")
    assert not [d for d in by_kind(docs, "ConfigMap") if "grafana_dashboard" in d["metadata"]["labels"]]


def test_rule_values_reach_the_alerts(helm: Helm) -> None:
    values = {
        "prometheusRule": {
            "enabled": True,
            "labels": {"release": "prometheus"},
            "alertLabels": {"team": "platform"},
            "awaitingDecisionFor": "5m",
            "leaseChurnThreshold": 7,
        }
    }
    rule = one(helm.render(values), "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    by_name = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    assert by_name["AgentihooksSeatAwaitingDecision"]["for"] == "5m"
    assert by_name["AgentihooksLeaseChurn"]["expr"].endswith("> 7")
    assert all(r["labels"]["team"] == "platform" for r in by_name.values())
    bad = helm.template({"prometheusRule": {"awaitingDecisionFor": "soon"}})
    assert bad.returncode != 0 and "awaitingDecisionFor" in bad.stderr


def _anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, spaces to dashes, punctuation dropped."""
    out = set()
    for line in markdown.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^a-z0-9 _-]", "", title).replace(" ", "-"))
    return out


def test_every_alert_links_its_runbook_section(helm: Helm) -> None:
    page = Path(__file__).resolve().parents[3] / "docs" / "troubleshooting.md"
    anchors = _anchors(page.read_text())
    rule = one(helm.render({"prometheusRule": {"enabled": True}}), "PrometheusRule")
    alerts = [r for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]
    assert len(alerts) >= 7
    base = "https://github.com/agentihooks/agentihooks-recovery/blob/main/docs/troubleshooting.md#"
    for alert in alerts:
        url = alert["annotations"]["runbook_url"]
        assert url.startswith(base), url
        assert url[len(base) :] in anchors, f"{alert['alert']}: no section #{url[len(base) :]} in {page.name}"
    mine = one(
        helm.render({"prometheusRule": {"enabled": True, "runbookBaseUrl": "https://wiki.example/runbook"}}),
        "PrometheusRule",
    )
    urls = [r["annotations"]["runbook_url"] for g in mine["spec"]["groups"] for r in g["rules"]]
    assert all(u.startswith("https://wiki.example/runbook#agentihooks") for u in urls)
    bad = helm.template({"prometheusRule": {"runbookBaseUrl": "wiki page#x"}})
    assert bad.returncode != 0 and "runbookBaseUrl" in bad.stderr


def test_the_dashboard_configmap(rendered: list[dict[str, Any]], helm: Helm) -> None:
    [cm] = [d for d in by_kind(rendered, "ConfigMap") if d["metadata"]["name"].endswith("-dashboard")]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = json.loads(cm["data"]["agentihooks-recovery.json"])
    assert shipped == dashboard() == json.loads(DASHBOARD.read_text())
    assert shipped["uid"] == "agentihooks-recovery"
    exprs = [t["expr"] for p in shipped["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 15
    assert all(
        t["datasource"]["uid"] == "${datasource}" for p in shipped["panels"] for t in p.get("targets", [])
    )
    moved = helm.render(
        {
            "grafanaDashboard": {
                "enabled": True,
                "label": "dashboards",
                "labelValue": "agentihooks",
                "annotations": {"grafana_folder": "Agentihooks"},
                "namespace": "monitoring",
            }
        }
    )
    [cm] = [d for d in by_kind(moved, "ConfigMap") if d["metadata"]["name"].endswith("-dashboard")]
    assert cm["metadata"]["labels"]["dashboards"] == "agentihooks"
    assert cm["metadata"]["annotations"] == {"grafana_folder": "Agentihooks"}
    assert cm["metadata"]["namespace"] == "monitoring"


# -- promtool test rules -------------------------------------------------------------------------------


def expand(template: str, labels: dict[str, str], value: str) -> str:
    """The few template forms the chart's annotations use: ``{{ $labels.x }}`` and ``{{ $value }}``."""
    out = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m.group(1), ""), template)
    return out.replace("{{ $value }}", value)


def expect(rules: dict[str, Any], alert: str, labels: dict[str, str], value: str = "") -> dict[str, Any]:
    """One expected alert: its labels (the rule's own added) and its annotations as rendered."""
    rule = next(r for g in rules["groups"] for r in g["rules"] if r["alert"] == alert)
    annotations = {k: expand(v, labels, value) for k, v in rule["annotations"].items()}
    return {"exp_labels": {**labels, **rule["labels"]}, "exp_annotations": annotations}


def series(name: str, **labels: str) -> str:
    """A series of the chart's namespace, as promtool's input takes it."""
    inner = ",".join(f'{k}="{v}"' for k, v in {"namespace": NAMESPACE, **labels}.items())
    return f"{name}{{{inner}}}"


def case(inputs: dict[str, str], checks: list[tuple[str, str, list[dict[str, Any]]]]) -> dict[str, Any]:
    return {
        "interval": "1m",
        "input_series": [{"series": s, "values": v} for s, v in inputs.items()],
        "alert_rule_test": [
            {"eval_time": at, "alertname": name, "exp_alerts": alerts} for at, name, alerts in checks
        ],
    }


def unit_tests(rules: dict[str, Any]) -> dict[str, Any]:
    ns = NAMESPACE
    demo = {"namespace": ns, "swarm": "demo"}
    tests = [
        # a seat waits: pending for awaitingDecisionFor (30m), then firing; a short wait never fires
        case(
            {
                series("agentihooks_seats_awaiting_decision", swarm="demo", instance="a"): "1x45",
                series("agentihooks_seats_awaiting_decision", swarm="quick", instance="a"): "1x10 0x35",
            },
            [
                ("29m", "AgentihooksSeatAwaitingDecision", []),
                (
                    "31m",
                    "AgentihooksSeatAwaitingDecision",
                    [expect(rules, "AgentihooksSeatAwaitingDecision", demo, "1")],
                ),
            ],
        ),
        # a worker refused its restore: fires at once, for the refusal's reason; native restores never
        case(
            {
                series(
                    "agentihooks_worker_restore_outcomes_total",
                    swarm="demo",
                    type="refused/corrupt_object",
                    instance="a",
                ): "0 0 0 1x30",
                series(
                    "agentihooks_worker_restore_outcomes_total", swarm="demo", type="native", instance="b"
                ): "0+1x33",
            },
            [
                ("2m", "AgentihooksRestoreRefused", []),
                (
                    "5m",
                    "AgentihooksRestoreRefused",
                    [expect(rules, "AgentihooksRestoreRefused", {**demo, "type": "refused/corrupt_object"})],
                ),
                ("30m", "AgentihooksRestoreRefused", []),  # out of the 15m window
            ],
        ),
        # refused restore requests: more than 2 in 15m fire; one does not
        case(
            {
                series(
                    "agentihooks_refusals_total", swarm="demo", reason="not_pending", instance="a"
                ): "0x5 1+1x20",
                series(
                    "agentihooks_refusals_total", swarm="calm", reason="no_checkpoint", instance="a"
                ): "0x5 1x20",
            },
            [
                (
                    "20m",
                    "AgentihooksRestoreRequestsRefused",
                    [expect(rules, "AgentihooksRestoreRequestsRefused", {**demo, "reason": "not_pending"})],
                ),
            ],
        ),
        # lease churn is summed over replicas: three takeovers by three replicas (one each) are churn,
        # one takeover in the window is not
        case(
            {
                series("agentihooks_lease_takeovers_total", swarm="demo", instance="a"): "0x30 1x13",
                series("agentihooks_lease_takeovers_total", swarm="demo", instance="b"): "0x31 1x12",
                series("agentihooks_lease_takeovers_total", swarm="demo", instance="c"): "0x32 1x11",
                series("agentihooks_lease_takeovers_total", swarm="calm", instance="a"): "0x30 1x13",
            },
            [
                ("29m", "AgentihooksLeaseChurn", []),
                ("40m", "AgentihooksLeaseChurn", [expect(rules, "AgentihooksLeaseChurn", demo)]),
            ],
        ),
        # Redis unreachable from one replica for 2m
        case(
            {
                series("agentihooks_redis_up", instance="a"): "1 1 0x10",
                series("agentihooks_redis_up", instance="b"): "1x12",
            },
            [
                ("3m", "AgentihooksRedisUnavailable", []),
                (
                    "5m",
                    "AgentihooksRedisUnavailable",
                    [expect(rules, "AgentihooksRedisUnavailable", {"namespace": ns, "instance": "a"})],
                ),
            ],
        ),
        # no replica holds the lease for 2m; a handover (0 for a minute) does not fire
        case(
            {
                series("agentihooks_lease_held", swarm="demo", instance="a"): "1 1 0x10",
                series("agentihooks_lease_held", swarm="demo", instance="b"): "0x12",
                series("agentihooks_lease_held", swarm="moved", instance="a"): "1 1 0x10",
                series("agentihooks_lease_held", swarm="moved", instance="b"): "0 0 0 1x9",
            },
            [
                ("3m", "AgentihooksNoLeader", []),
                ("5m", "AgentihooksNoLeader", [expect(rules, "AgentihooksNoLeader", demo)]),
            ],
        ),
        # no operator scraped any more (its series go stale)
        case(
            {series("agentihooks_build_info", version="0.1.0", instance="a"): "1 1 1 stale"},
            [
                ("2m", "AgentihooksOperatorDown", []),
                (
                    "10m",
                    "AgentihooksOperatorDown",
                    [expect(rules, "AgentihooksOperatorDown", {"namespace": ns})],
                ),
            ],
        ),
    ]
    return {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": tests}


def test_promtool_unit_tests_of_every_alert(rules: dict[str, Any], tmp_path: Path) -> None:
    spec = unit_tests(rules)
    tested = {t["alertname"] for c in spec["tests"] for t in c["alert_rule_test"]}
    assert tested == ALERTS
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules))
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    res = promtool("test", "rules", "tests.yaml", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    # and a wrong expectation fails (the tests do test): the awaiting seat claimed at 29m
    spec["tests"][0]["alert_rule_test"][0]["exp_alerts"] = spec["tests"][0]["alert_rule_test"][1][
        "exp_alerts"
    ]
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    assert promtool("test", "rules", "tests.yaml", cwd=tmp_path).returncode != 0
