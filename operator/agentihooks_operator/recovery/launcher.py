"""The two seams of the recovery core: how attempts are launched, and where faults are injected.

The Kubernetes operator implements :class:`ReplacementLauncher` with Pods and
Secrets; tests use a small in-memory one. All methods must be idempotent: the
journal may call ``launch`` or ``retire`` again after a crash, but only after
``exists`` showed that the earlier call did not take effect.

Two optional methods refine that observation (looked up with ``getattr``):
``launched(execution_id)`` (the launch took effect in full: the Kubernetes one
reads the Pod and its Secret) and ``deleted(execution_id)`` (positive evidence
that the attempt's Pod was created and has gone since: its launch must not be
sent again, however absent the Pod looks now).
"""

from __future__ import annotations

from typing import Literal, Protocol

from .errors import InjectedFault
from .models import LaunchPlan


class ReplacementLauncher(Protocol):
    """Creates and removes attempt Pods (sync; called from a worker thread by kopf)."""

    def launch(self, plan: LaunchPlan) -> Literal["created", "exists"]:
        """Create the attempt's Pod named after ``plan.execution_id``; a repeat answers ``exists``."""
        ...

    def exists(self, execution_id: str) -> bool:
        """Whether the attempt's Pod exists: the observation behind an ``unknown`` journal step."""
        ...

    def retire(self, execution_id: str) -> None:
        """Delete the fenced attempt's Pod; deleting an absent Pod is not an error."""
        ...


class FaultInjector(Protocol):
    """Called at every named write point (``before:<step>`` / ``after:<step>``); may raise."""

    def __call__(self, point: str) -> None: ...


class CrashAt:
    """A fault injector that raises :class:`InjectedFault` once at ``point``."""

    def __init__(self, point: str) -> None:
        self.point = point
        self.fired = False

    def __call__(self, point: str) -> None:
        if point == self.point and not self.fired:
            self.fired = True
            raise InjectedFault(f"injected crash at {point}")


def no_faults(point: str) -> None:
    """The default injector: does nothing."""
