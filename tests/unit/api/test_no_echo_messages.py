"""The pure parts of "never echo the input": validation messages and held-recovery step refusals."""

from __future__ import annotations

import pytest
from agentihooks_operator.api.common import field_errors
from agentihooks_operator.api.handlers.held import ResumeRequest, _unechoed
from agentihooks_operator.api.schemas import DecisionRequest, WatermarkReport
from pydantic import BaseModel, ValidationError, field_validator

MARK = "zq-echo-7f3a"


def errors(model: type[BaseModel], data: object) -> list[str]:
    with pytest.raises(ValidationError) as e:
        model.model_validate(data)
    return field_errors(model, e.value)


def test_made_up_keys_are_not_named_and_declared_fields_are() -> None:
    got = errors(DecisionRequest, {"choice": "resume", "agent": "a", MARK: 1})
    assert got == ["body: unexpected field"]
    got = errors(ResumeRequest, {"resume_token": "t", "observed": {MARK: 1}})
    assert got == ["observed.*: Input should be a valid string"]
    got = errors(DecisionRequest, {"choice": MARK})
    assert got == ["choice: Input should be 'resume' or 'fresh'", "agent: Field required"]


def test_a_message_that_would_quote_the_input_says_invalid_value() -> None:
    class Quoting(BaseModel):
        name: str

        @field_validator("name")
        @classmethod
        def _no(cls, v: str) -> str:
            raise ValueError(f"{v} is not allowed")

    assert errors(Quoting, {"name": MARK}) == ["name: invalid value"]
    assert errors(WatermarkReport, {"watermark": -5}) == [
        "watermark: Input should be greater than or equal to 0"
    ]


def test_held_step_refusals_do_not_name_what_the_caller_sent() -> None:
    steps = [
        {"step": MARK, "reason": "no such step", "accepts": []},
        {"step": "fence", "reason": "the step is ok", "accepts": []},
        {"step": "release_account", "reason": f"value {MARK!r} is not accepted", "accepts": ["applied"]},
    ]
    assert _unechoed(steps) == [
        {"step": None, "reason": "no such step", "accepts": []},
        {"step": "fence", "reason": "the step is ok", "accepts": []},
        {"step": "release_account", "reason": "the value is not accepted", "accepts": ["applied"]},
    ]
    assert MARK in str(steps)  # the core's own list is left as it was
