"""The listener's limits are settings (``AGENTIHOOKS_CONTROL_*``) with the defaults docs/api.md names."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest
from agentihooks_operator.api.config import ApiConfig
from agentihooks_operator.api.limits import ServerLimits

DOC = Path(__file__).resolve().parents[3] / "docs" / "api.md"


def test_defaults_are_the_server_limits_defaults() -> None:
    assert ApiConfig().limits() == ServerLimits()
    assert ServerLimits().header_timeout < ServerLimits().keepalive_timeout


def test_each_limit_is_read_from_its_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    values = {
        "HEADER_TIMEOUT": "2.5",
        "KEEPALIVE_TIMEOUT": "30",
        "BODY_TIMEOUT": "7",
        "MAX_CONNECTIONS": "64",
        "BACKLOG": "32",
        "MAX_LINE_SIZE": "4096",
        "MAX_FIELD_SIZE": "2048",
        "MAX_HEADERS": "40",
        "MAX_CONNECTIONS_PER_SOURCE": "8",
    }
    for name, value in values.items():
        monkeypatch.setenv(f"AGENTIHOOKS_CONTROL_{name}", value)
    limits = ApiConfig().limits()
    for name, value in values.items():
        assert getattr(limits, name.lower()) == type(getattr(limits, name.lower()))(value)


@pytest.mark.parametrize(
    ("name", "value"), [("HEADER_TIMEOUT", "0"), ("MAX_CONNECTIONS", "0"), ("BACKLOG", "-1")]
)
def test_nonsense_values_are_refused_at_start(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(f"AGENTIHOOKS_CONTROL_{name}", value)
    with pytest.raises(ValueError, match=name.lower()):
        ApiConfig()


def test_docs_name_every_setting_with_its_default() -> None:
    text = DOC.read_text()
    defaults = ServerLimits()
    for f in fields(ServerLimits):
        env = f"AGENTIHOOKS_CONTROL_{f.name.upper()}"
        row = next((line for line in text.splitlines() if env in line), None)
        assert row is not None, f"{env} is not in docs/api.md"
        value = getattr(defaults, f.name)
        shown = ",".join(value) if isinstance(value, tuple) else f"{value:g}"
        assert f"`{shown}`" in row, f"{env}: default {value} not on its row"


def test_per_source_exempt_networks_are_read_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTIHOOKS_CONTROL_PER_SOURCE_EXEMPT", " 10.0.0.0/8 , fd00::/8,")
    assert ApiConfig().limits().per_source_exempt == ("10.0.0.0/8", "fd00::/8")
    monkeypatch.setenv("AGENTIHOOKS_CONTROL_PER_SOURCE_EXEMPT", "")
    assert ApiConfig().limits().per_source_exempt == ()  # every address held to the limit
    monkeypatch.setenv("AGENTIHOOKS_CONTROL_PER_SOURCE_EXEMPT", "127.0.0.0/8,ingress")
    with pytest.raises(ValueError, match="AGENTIHOOKS_CONTROL_PER_SOURCE_EXEMPT: 'ingress' is not a network"):
        ApiConfig()
