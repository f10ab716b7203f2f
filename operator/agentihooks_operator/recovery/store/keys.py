"""Redis key names of one swarm's recovery state.

Keys follow the original swarm v2 keyspace ``<root>:swarm:<slug>:<part>`` with
one difference: the slug is wrapped in a Redis Cluster hash tag,
``<root>:swarm:{<slug>}:<part>``, so every key of a swarm hashes to the same
slot and a Lua script may touch all of them atomically. On a single Redis the
braces are just characters of the name. ``agentihooks admin migrate-keys``
moves a swarm's keys written by the original (unbraced) to these names.

A Swarm is really known by namespace and name (:mod:`..identity`). Built with a
namespace, :class:`SwarmKeys` puts both in the hash tag,
``<root>:swarm:{<namespace>/<name>}:<part>``, so same-named Swarms of two
namespaces never share a key while each one's keys still share one slot.

Part names keep the original's meaning. The original's ``executions`` part
holds its own AgentRecord per execution; this package never writes a record of
another shape there: its attempt records live in ``attempt-records``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import InvalidInput
from ..identity import SwarmId

_SLUG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")
_ROOT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")

#: Every part of the original keyspace that recovery uses (COMPAT.md), whether or not this package
#: reads it; ``migrate-keys`` moves exactly these from the original's unbraced names.
ORIGINAL_KEYSPACE = (
    "control-owner",
    "control-epoch",
    "attempt-fences",
    "attempt-recoveries",
    "attempt-late-observations",
    "attempt-nodes",
    "image-pull-since",
    "recovery-paused",
    "heartbeats",
    "launch-grants",
    "executions",
)
#: Original parts the write scripts use (same names, same meaning).
ORIGINAL_PARTS = (
    "control-owner",
    "control-epoch",
    "recovery-paused",
    "attempt-fences",
    "attempt-recoveries",
    "heartbeats",
    "launch-grants",
)
#: Parts this package adds. ``attempt-records`` is its own attempt record (never ``executions``).
ADDED_PARTS = (
    "attempt-records",
    "seats",
    "account-slots",
    "worker-credentials",
    "restore-outcomes",
    "recovery-requests",
    "ledger-tasks",
    "attempt-journal",
    "recovery-work",
    "seat-handoffs",
    "recovery-metrics",
    "recovery-events",
    "held-recoveries",
    "restore-refusals",
    "seats-version",
    "fenced-credentials",
)
#: Every key a write script receives, in this order (``KEYS[i]`` in Lua).
SCRIPT_PARTS = ORIGINAL_PARTS + ADDED_PARTS
#: Parts written outside the core's scripts, by the operator and the control API. They hold
#: bookkeeping whose loss is safe (a grace clock restarts, a leftover Secret is re-noted on the
#: next retire, an upload may no longer be read back), so they are not lease-guarded.
#: ``image-pull-since`` is an original part; the others are added (a lost ``attempt-stops`` entry only
#: names a drained attempt's fence ``node_lost`` instead of ``evicted``). ``wait-mark`` is a counter
#: bumped beside every guarded write when ``WAIT`` is on (:mod:`.durable`); its value means nothing.
OUTSIDE_PARTS = ("image-pull-since", "retire-leftovers", "api-uploads", "attempt-stops", "wait-mark")


@dataclass(frozen=True)
class SwarmKeys:
    """The key names of one swarm under one root prefix."""

    prefix: str
    swarm: str
    #: The Swarm's namespace. ``None`` is the name-only layout every caller still uses today;
    #: with a namespace the hash tag carries both parts (:attr:`SwarmId.hash_tag`).
    namespace: str | None = None

    def __post_init__(self) -> None:
        if not _ROOT.fullmatch(self.prefix):
            raise InvalidInput(f"not a usable key prefix: {self.prefix!r}")
        if not _SLUG.fullmatch(self.swarm):
            raise InvalidInput(f"not a usable swarm name: {self.swarm!r}")
        if self.namespace is not None:
            SwarmId(self.namespace, self.swarm)  # refuses an unusable namespace, naming it

    @classmethod
    def of(cls, prefix: str, swarm: SwarmId) -> SwarmKeys:
        """The namespaced keys of ``swarm`` (namespace and name in one hash tag)."""
        return cls(prefix, swarm.name, swarm.namespace)

    @property
    def tag(self) -> str:
        """The hash tag every key of this swarm carries: ``{<name>}`` or ``{<namespace>/<name>}``."""
        if self.namespace is None:
            return "{" + self.swarm + "}"
        return SwarmId(self.namespace, self.swarm).hash_tag

    @property
    def label(self) -> str:
        """How logs, metrics and Events name this swarm: ``<namespace>/<name>`` (or the name alone)."""
        return self.swarm if self.namespace is None else f"{self.namespace}/{self.swarm}"

    def part(self, name: str) -> str:
        """The full key of ``name`` (one of :data:`SCRIPT_PARTS`)."""
        if name not in SCRIPT_PARTS:
            raise InvalidInput(f"unknown key part: {name!r}")
        return f"{self.prefix}:swarm:{self.tag}:{name}"

    def braced(self, name: str) -> str:
        """This package's key of any part name (hash-tagged swarm), known to the scripts or not."""
        return f"{self.prefix}:swarm:{self.tag}:{name}"

    def unbraced(self, name: str) -> str:
        """The original's key of a part name: ``<root>:swarm:<slug>:<part>``, no hash tag."""
        return f"{self.prefix}:swarm:{self.swarm}:{name}"

    @property
    def all(self) -> list[str]:
        """Every key, in :data:`SCRIPT_PARTS` order (what write scripts receive as ``KEYS``)."""
        return [self.part(p) for p in SCRIPT_PARTS]

    @property
    def control_owner(self) -> str:
        return self.part("control-owner")

    @property
    def control_epoch(self) -> str:
        return self.part("control-epoch")

    @property
    def recovery_paused(self) -> str:
        return self.part("recovery-paused")

    @property
    def attempt_fences(self) -> str:
        return self.part("attempt-fences")

    @property
    def attempt_recoveries(self) -> str:
        return self.part("attempt-recoveries")

    @property
    def heartbeats(self) -> str:
        return self.part("heartbeats")

    @property
    def launch_grants(self) -> str:
        return self.part("launch-grants")

    @property
    def attempt_records(self) -> str:
        """Hash: execution id → this package's attempt record (the original's part for it differs)."""
        return self.part("attempt-records")

    @property
    def seats(self) -> str:
        return self.part("seats")

    @property
    def account_slots(self) -> str:
        return self.part("account-slots")

    @property
    def worker_credentials(self) -> str:
        return self.part("worker-credentials")

    @property
    def fenced_credentials(self) -> str:
        """Hash: execution id → the sha256 of the credential its fence revoked, so a worker still
        calling with it is told ``fenced`` (and stops its agent) rather than a bare 403."""
        return self.part("fenced-credentials")

    @property
    def restore_outcomes(self) -> str:
        return self.part("restore-outcomes")

    @property
    def recovery_requests(self) -> str:
        return self.part("recovery-requests")

    @property
    def ledger_tasks(self) -> str:
        return self.part("ledger-tasks")

    @property
    def attempt_journal(self) -> str:
        return self.part("attempt-journal")

    @property
    def recovery_work(self) -> str:
        return self.part("recovery-work")

    @property
    def seat_handoffs(self) -> str:
        return self.part("seat-handoffs")

    @property
    def recovery_metrics(self) -> str:
        return self.part("recovery-metrics")

    @property
    def recovery_events(self) -> str:
        return self.part("recovery-events")

    @property
    def held_recoveries(self) -> str:
        return self.part("held-recoveries")

    @property
    def restore_refusals(self) -> str:
        """Hash: execution id → the restore refusal its worker reported (and its relaunch, once made)."""
        return self.part("restore-refusals")

    @property
    def seats_version(self) -> str:
        """Hash: ``v``, the random token of the seats map's last write, and ``k``, of the last write that
        added seats (:mod:`.seatsmap`)."""
        return self.part("seats-version")

    # -- parts outside the write scripts (see OUTSIDE_PARTS) ---------------------------------
    @property
    def image_pull_since(self) -> str:
        """Hash: execution id → when the attempt first showed an image-pull failure (ms)."""
        return f"{self.prefix}:swarm:{self.tag}:image-pull-since"

    @property
    def attempt_stops(self) -> str:
        """Hash: execution id → the reason its Pod was asked to stop for, while it was held stopping."""
        return f"{self.prefix}:swarm:{self.tag}:attempt-stops"

    @property
    def wait_mark(self) -> str:
        """Counter: written beside every guarded write under ``WAIT``, so the ``WAIT`` covers every
        write the primary holds at that moment, not only this connection's (:mod:`.durable`)."""
        return f"{self.prefix}:swarm:{self.tag}:wait-mark"

    @property
    def retire_leftovers(self) -> str:
        """Set: retired attempts whose Secret and ConfigMap may still exist."""
        return f"{self.prefix}:swarm:{self.tag}:retire-leftovers"

    def api_uploads(self, execution_id: str) -> str:
        """Set: object digests ``execution_id`` uploaded through the control API."""
        if not _SLUG.fullmatch(execution_id):
            raise InvalidInput(f"not a usable execution id: {execution_id!r}")
        return f"{self.prefix}:swarm:{self.tag}:api-uploads:{execution_id}"
