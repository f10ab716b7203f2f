"""The fault campaign's history: every operation it saw, one JSON object per line, checked afterwards.

A campaign (issue 26) records what happened while its nemesis injected faults,
and :mod:`.checker` decides from this file alone whether an invariant broke.
Times (``t``) are seconds since the campaign began, taken where the effect
was applied (the API server's audit time for Pods, the write script's time
for Redis writes), so entries from different sources interleave correctly.

Entry kinds:

* ``lease`` — the swarm's lease as observed: holder, epoch, and how many of
  the epochs up to it a replica counted as a takeover (all replicas together).
* ``write`` — a guarded Redis write and the epoch it carried, accepted or not.
* ``pod`` — a Pod create or delete from the audit log, with the seat,
  generation and attempt its labels name.
* ``release`` — a grant or account release the broker received, and whether
  it applied (a repeat answered "already released" did not).
* ``op`` — a client operation (fence, decision, outcome) with its result:
  ``ok`` (acknowledged), ``refused`` or ``unknown`` (no answer).
* ``fault`` — a fault the nemesis injected (its kind and target).
* ``heal`` — the nemesis's last fault ended.
* ``final`` — what the stores hold once the campaign has healed.

A line that is not one of these is an error naming its line number; nothing
is checked from a history that cannot be read whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    t: float = Field(ge=0)
    #: Line number in the history file (1-based), filled in by :func:`read`; 0 when built in memory.
    line: int = Field(default=0, exclude=True)


class Lease(_Entry):
    kind: Literal["lease"]
    swarm: str
    holder: str | None = None
    epoch: int = Field(ge=0)
    takeovers: int = Field(ge=0)
    #: Takes of this swarm's lease that got no answer so far (each may have moved the epoch).
    unanswered: int = Field(default=0, ge=0)
    #: Some replica held this epoch with its take confirmed by the replicas (false: a take WAIT did
    #: not confirm, which a failover may undo).
    confirmed: bool = True


class Write(_Entry):
    kind: Literal["write"]
    swarm: str
    what: str
    epoch: int = Field(ge=0)
    accepted: bool
    attempt: str | None = None


class Pod(_Entry):
    kind: Literal["pod"]
    verb: Literal["create", "delete"]
    swarm: str
    seat: str
    generation: int = Field(ge=1)
    attempt: str
    name: str
    user: str = ""


class Release(_Entry):
    kind: Literal["release"]
    swarm: str
    attempt: str
    target: Literal["grant", "account"]
    applied: bool


class Op(_Entry):
    kind: Literal["op"]
    op: Literal["fence", "decision", "outcome"]
    swarm: str
    seat: str
    attempt: str
    result: Literal["ok", "refused", "unknown"]
    #: decision: the choice posted (``resume`` or ``fresh``).
    choice: str | None = None
    #: outcome: the continuity the launch directed, and what the worker reported.
    directive: str | None = None
    reported: str | None = None
    #: outcome: a verification refusal, when the worker refused its checkpoint.
    refusal: str | None = None
    #: What the client got back (status and reason, or the transport error); only a 500 is judged.
    answer: str | None = None


class Request(_Entry):
    """A request the model API received, and the attempt that sent it (its ``X-Agentihooks-Execution``)."""

    kind: Literal["request"]
    swarm: str
    attempt: str


class Fault(_Entry):
    kind: Literal["fault"]
    fault: str
    target: str = ""


class Heal(_Entry):
    kind: Literal["heal"]


class SeatState(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    live: str | None = None
    pending_decision: bool = False
    #: What the observer saw of the seat (its Pods and fences), printed with a liveness violation.
    seen: str = ""


class Final(_Entry):
    kind: Literal["final"]
    swarm: str
    fences: list[str] = []
    decisions: dict[str, str] = {}
    outcomes: dict[str, str] = {}
    seats: dict[str, SeatState] = {}


Entry = Annotated[
    Lease | Write | Pod | Release | Op | Request | Fault | Heal | Final, Field(discriminator="kind")
]
_ENTRY: TypeAdapter[Entry] = TypeAdapter(Entry)


class HistoryError(ValueError):
    """The history cannot be read: names the line and what is wrong with it."""


def parse(lines: Iterable[str]) -> list[Entry]:
    out: list[Entry] = []
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as e:
            raise HistoryError(f"history line {number}: not JSON ({e.msg})") from None
        if not isinstance(raw, dict):
            raise HistoryError(f"history line {number}: an entry is a JSON object")
        try:
            entry = _ENTRY.validate_python(raw)
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "entry"
            raise HistoryError(f"history line {number}: {where}: {first['msg']}") from None
        out.append(entry.model_copy(update={"line": number}))
    return out


def read(path: Path) -> list[Entry]:
    with path.open(encoding="utf-8") as f:
        return parse(f)


def dump(entries: Iterable[Entry]) -> Iterator[str]:
    for entry in entries:
        yield entry.model_dump_json(exclude_none=True) + "\n"
