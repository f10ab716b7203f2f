"""``agentihooks-operator --check-install`` (the chart's helm test): one line per check, the broken
part named, exit 1 when any failed. On a real install: tests/integration/chart/test_chart_on_real_node.py."""

from __future__ import annotations

import pytest
from agentihooks_operator import selftest


def test_every_check_is_one_line_and_a_failure_names_its_part(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> str:
        raise ConnectionError("Error 111 connecting to r-redis:6379. Connection refused.")

    monkeypatch.setattr(
        selftest,
        "checks",
        lambda url: [
            ("operator", lambda: "the operator is ready"),
            ("Redis", broken),
            ("CRD", lambda: "served"),
        ],
    )
    lines: list[str] = []
    assert selftest.run("http://svc", lines.append) == 1
    assert lines == [
        "ok: the operator is ready",
        "FAILED: Redis: ConnectionError: Error 111 connecting to r-redis:6379. Connection refused.",
        "ok: served",
        "1 check(s) failed",
    ]
    monkeypatch.setattr(selftest, "checks", lambda url: [("operator", lambda: "ready")])
    lines.clear()
    assert selftest.run("http://svc", lines.append) == 0 and lines[-1] == "the install works"


def test_the_checks_go_through_the_url_given_and_in_order() -> None:
    parts = [part for part, _ in selftest.checks("http://r-agentihooks-recovery.ns.svc:80/")]
    assert parts == ["operator", "control API", "Redis", "CRD"]
