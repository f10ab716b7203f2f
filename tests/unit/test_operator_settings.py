"""A setting the operator cannot use ends it with one line per setting, not a traceback (issue 47)."""

from __future__ import annotations

import logging

import pytest
from agentihooks_operator.main import settings_or_exit


def test_each_bad_setting_is_one_line_naming_its_variable_and_never_its_value(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    monkeypatch.setenv("AGENTIHOOKS_CONTROL_PORT", "99999")
    monkeypatch.setenv("AGENTIHOOKS_LOG_FORMAT", "xml")
    monkeypatch.setenv("AGENTIHOOKS_OPERATOR_TOKEN_SHA256", "hunter2-not-a-digest")
    with pytest.raises(SystemExit) as exited:
        settings_or_exit()
    assert exited.value.code == 2
    lines = [r.getMessage() for r in caplog.records]
    assert lines[-1] == "the operator did not start: fix the settings above"
    named = {line.split(":", 1)[0] for line in lines[:-1]}
    assert named == {
        "AGENTIHOOKS_CONTROL_PORT",
        "AGENTIHOOKS_LOG_FORMAT",
        "AGENTIHOOKS_OPERATOR_TOKEN_SHA256",
    }, lines
    assert "hunter2" not in caplog.text and "Traceback" not in caplog.text
    assert all("\n" not in line for line in lines)


def test_good_settings_are_returned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTIHOOKS_NAMESPACES", "team-a,team-b")
    assert settings_or_exit().namespace_list == ["team-a", "team-b"]
