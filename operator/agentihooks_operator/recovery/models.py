"""What callers hand the recovery core and what it hands back.

The operator classifies Pods into :class:`AttemptObservation`; the core answers
with :class:`PassReport`, :class:`LaunchPlan` (what to create), decisions and
handoff cards. Stored records live in :mod:`.store.records`.
"""

from __future__ import annotations

import re
from typing import Literal

from agentihooks_checkpoint.directive import IDENTIFIER, RestoreDirective
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from .store.records import DecisionMode, RestoreSource, StoredOutcome

EXECUTION_ID = r"^exe-[0-9a-f]{32}$"
EXECUTION_RE = re.compile(EXECUTION_ID)

#: ``stopping``: asked to stop (a drain, an eviction) and still within its grace period; alive to the
#: core (never fenced) until its containers end.
AttemptState = Literal["pending", "running", "stopping", "succeeded", "failed", "gone"]
FailureReason = Literal["oom_killed", "evicted", "node_lost", "image_pull", "application_exit"]
Choice = Literal["resume", "fresh"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AttemptObservation(_Model):
    """One current Pod as the operator saw it this pass (image-pull grace already applied).

    ``failed`` and ``gone`` mark a failure; without a ``reason`` they count as
    ``application_exit`` and ``node_lost``. An attempt whose launch is still being
    confirmed is never fenced for being ``gone``: the journal resolves it first.
    """

    execution_id: str = Field(pattern=IDENTIFIER)
    seat: str = Field(pattern=IDENTIFIER)
    generation: int = Field(ge=1)
    state: AttemptState
    reason: FailureReason | None = None
    #: A spawn superseded as a legacy specification: replaced fresh without a choice.
    superseded_legacy: bool = False
    #: The attempt's death is proven (every container of its Pod reported terminated). ``None``: judged
    #: by the state, a ``failed`` attempt proven unless its reason is ``node_lost``, a ``gone`` one never.
    proven: bool | None = None

    @property
    def death_proven(self) -> bool:
        if self.proven is not None:
            return self.proven
        return self.state == "failed" and self.reason != "node_lost"


class LaunchPlan(_Model):
    """Everything the launcher needs to create one attempt's Pod (and its Secret)."""

    execution_id: str = Field(pattern=EXECUTION_ID)
    seat: str
    generation: int = Field(ge=1)
    task_id: str
    task_generation: int = Field(ge=1)
    task_text: str
    directive: RestoreDirective | None = None
    restore_from: RestoreSource | None = None
    grant_id: str
    #: The worker credential; goes into a Secret, never into a log line.
    worker_token: SecretStr
    compatibility_key: str
    epoch: int
    #: Sent again after a crash left the launch ``unknown`` (a new credential): the launcher then
    #: writes the credential Secret before the Pod, never beside it.
    resumed: bool = False
    #: The namespace of the attempt's checkpoint scope (``AttemptRecord.store_namespace``).
    store_namespace: str | None = None
    #: The worker lease the attempt is launched with (``AttemptRecord.worker_lease_ms``), if any.
    worker_lease_ms: int | None = None


class DecisionResult(_Model):
    """An accepted (or replayed) decision for a fenced attempt."""

    execution_id: str
    mode: DecisionMode
    checkpoint: str | None = None
    replacement: str | None = None
    directive: RestoreDirective | None = None
    decided_by: str | None = None
    #: True when this call admitted nothing new (the same choice was accepted before).
    replayed: bool = False


class Refusal(_Model):
    execution_id: str
    choice: Choice
    agent: str
    reason: str


class PassReport(BaseModel):
    """What one pass did."""

    leader: bool = False
    lease_lost: bool = False
    epoch: int = 0
    paused: bool = False
    fenced: list[str] = Field(default_factory=list)
    decisions: list[DecisionResult] = Field(default_factory=list)
    launches: list[str] = Field(default_factory=list)
    retired: list[str] = Field(default_factory=list)
    refusals: list[Refusal] = Field(default_factory=list)
    skipped_stale: list[str] = Field(default_factory=list)
    #: Attempts whose recovery stopped at a held step this pass (waiting for the operator).
    held: list[str] = Field(default_factory=list)
    #: Redis round trips this pass made (scripts, pipelines, single commands).
    round_trips: int = 0


class HeldStep(_Model):
    """A recovery step waiting for the operator's answer (on a handoff card and in listings)."""

    call: str
    execution_id: str
    seat: str
    step: str
    since_ms: int
    expires_at_ms: int
    #: The answers the step takes (``POST /v1/recoveries/{call}/resume`` ``observed`` values).
    accepts: list[str] = Field(default_factory=lambda: ["applied", "not_applied"])


class StepProgress(_Model):
    """One step of a held recovery's progress; ``path`` is what ``observed`` names."""

    path: str
    status: Literal["ok", "unknown", "failed", "held", "skipped"]
    #: For a step that waits for an answer: the values ``observed`` may give it.
    accepts: list[str] | None = None
    #: ``kept`` for a step that ran ok before this resume and was not sent again.
    resumed: str | None = None


class RecoveryProgress(_Model):
    """What a held recovery did: every step with its status; a new token while it is not finished."""

    call: str
    execution_id: str
    seat: str
    status: Literal["ok", "unknown", "failed", "held", "skipped"]
    progress: list[StepProgress]
    summary: str
    #: Returned once, only while the recovery is not finished; the previous token stops working.
    resume_token: str | None = None
    #: ``resume_failed`` when the resume stopped on an internal error (the checkpoint is dropped).
    error: str | None = None


class RestoreRefusedView(_Model):
    """A replacement that refused its restore and waits for the operator to fix the cause and relaunch."""

    execution_id: str
    reason: str
    message: str
    #: What to fix before relaunching (by reason).
    hint: str
    reported_at: int
    #: After a damaged checkpoint: the newest of the seat's lineage that verifies now, which a relaunch
    #: (not ``--fresh``) resumes from (``None``: none does, or the refusal is not about the checkpoint).
    offered_checkpoint: str | None = None


class RelaunchResult(_Model):
    """A relaunch of a refused replacement (or the same one again: ``replayed``)."""

    seat: str
    refused: str
    replacement: str
    generation: int
    directive: RestoreDirective | None = None
    reason: str
    relaunched_by: str | None = None
    replayed: bool = False


class HandoffCard(_Model):
    """One row of ``status --json`` ``handoffs[]`` and of the ledger's Handoff outcomes panel."""

    seat: str
    execution_id: str
    at: int
    reason: str
    continuity: str
    binding: str
    bound_at: int | None = None
    successor: str | None = None
    awaiting: str | None = None
    checkpoint: str | None = None
    resume_available: bool = False
    resume_label: str | None = None
    outcome: StoredOutcome | None = None
    #: The step this seat's recovery is held at, while it waits for an observation.
    held: HeldStep | None = None
    #: The successor refused its restore (reason, message, fix hint); cleared by a relaunch.
    restore_refused: RestoreRefusedView | None = None
    #: How often the seat's replacement was relaunched after a refused restore.
    relaunches: int = 0
    #: Why the seat's current attempt cannot be launched yet (a missing or unreadable provider
    #: credential Secret, the API server refusing the Pod); nothing runs until it is fixed.
    launch_blocked: str | None = None
    #: When (ms) the blocked launch is tried next: the waits between tries grow (:mod:`.steps.launchwait`).
    launch_retry_at: int | None = None
    #: The fenced attempt's death is not proven and its worker held a lease: no replacement runs before
    #: this time (ms), when the old worker has stopped its agent at the latest.
    old_attempt_stops_by: int | None = None


class RecoveryEvent(_Model):
    """One entry of the swarm's bounded telemetry stream."""

    id: str
    type: Literal[
        "fence", "recovery", "outcome", "held", "step", "launch_blocked", "restore_refused", "relaunch"
    ]
    execution_id: str
    seat: str
    expected_generation: int | None = None
    observed_generation: int | None = None
    epoch: int
    detail: str = ""
    at_ms: int
    #: For ``held`` and resumed ``step`` records: the held recovery's call and the step's path.
    parent_call: str | None = None
    path: str | None = None
    resumed: bool | None = None
    observed: str | None = None
    sent: bool | None = None
