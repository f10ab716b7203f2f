"""Request and answer bodies of the control API (pydantic), also the source of the OpenAPI schemas."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

AGENT = r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$"


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DecisionRequest(_In):
    choice: Literal["resume", "fresh"]
    #: The master agent the choice is made for (the operator may name anyone; it is recorded as operator).
    agent: str = Field(pattern=AGENT)


class SeatRequest(_In):
    choice: Literal["resume", "fresh"]
    #: Optional for a master (its bound agent is used); when given it must be that agent.
    agent: str | None = Field(default=None, pattern=AGENT)


class SessionReport(_In):
    session_id: str = Field(pattern=AGENT)


class WatermarkReport(_In):
    watermark: int = Field(ge=0, le=2**53)


class Problem(BaseModel):
    error: str
    message: str


class DecisionAnswer(BaseModel):
    status: Literal["accepted", "recorded"]
    execution_id: str
    decision: str | None = None
    choice: str | None = None
    checkpoint: str | None = None
    replacement: str | None = None
    directive: dict[str, object] | None = None
    decided_by: str | None = None
    replayed: bool = False
    message: str | None = None


class PauseAnswer(BaseModel):
    swarm: str
    paused: bool


class Accepted(BaseModel):
    accepted: bool = True


class SizeAnswer(BaseModel):
    size: int | None


class KeysAnswer(BaseModel):
    keys: list[str]


class WrittenAnswer(BaseModel):
    key: str
    size: int
