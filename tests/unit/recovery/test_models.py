"""Edge models: observations and launch plans refuse bad input with a clear error; tokens stay secret."""

from __future__ import annotations

import pytest
from agentihooks_operator.recovery import AttemptObservation, CrashAt, InjectedFault, LaunchPlan
from pydantic import SecretStr, ValidationError


def test_observation_refuses_unknown_state_and_reason() -> None:
    with pytest.raises(ValidationError, match="state"):
        AttemptObservation(execution_id="exe-1", seat="eng-1", generation=1, state="exploded")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="reason"):
        AttemptObservation(
            execution_id="exe-1",
            seat="eng-1",
            generation=1,
            state="failed",
            reason="cosmic_ray",  # type: ignore[arg-type]
        )
    with pytest.raises(ValidationError, match="generation"):
        AttemptObservation(execution_id="exe-1", seat="eng-1", generation=0, state="running")


def test_launch_plan_keeps_the_token_out_of_its_text() -> None:
    plan = LaunchPlan(
        execution_id="exe-" + "b" * 32,
        seat="eng-1",
        generation=1,
        task_id="task-1",
        task_generation=1,
        task_text="t",
        grant_id="grant-1",
        worker_token=SecretStr("very-secret-token"),
        compatibility_key="v1",
        epoch=1,
    )
    assert "very-secret-token" not in repr(plan) and "very-secret-token" not in plan.model_dump_json()
    assert plan.worker_token.get_secret_value() == "very-secret-token"
    with pytest.raises(ValidationError, match="execution_id"):
        LaunchPlan.model_validate({**plan.model_dump(), "execution_id": "pod-1", "worker_token": "x"})


def test_crash_at_fires_once_at_its_point() -> None:
    crash = CrashAt("before:fence")
    crash("after:fence")
    with pytest.raises(InjectedFault, match="before:fence"):
        crash("before:fence")
    crash("before:fence")  # only once
