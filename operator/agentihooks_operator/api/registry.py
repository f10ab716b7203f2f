"""The swarms this controller process serves: their Recovery, current spec and master credentials.

The operator publishes each Swarm after every recovery pass; the API only reads
the registry. Master credentials are read from the Secret each master names,
hashed at once and kept as digests only; they are read again when the spec
changes or after ``refresh_seconds`` so a rotated Secret takes effect.

Entries are keyed by namespace and name (:class:`SwarmId`): two same-named
Swarms in two namespaces are two entries. A lookup by name alone answers only
when one namespace holds the name, and is refused naming them all otherwise.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..recovery import Recovery
from ..recovery.identity import SwarmId, resolve
from ..swarm import SwarmSpec
from .access.auth import sha256_hex

log = logging.getLogger("agentihooks.api")

#: ``(namespace, secret name) -> token`` or ``None`` when the Secret or its key is absent.
SecretReader = Callable[[str, str], str | None]


def no_secrets(namespace: str, name: str) -> str | None:
    return None


@dataclass
class SwarmEntry:
    name: str
    recovery: Recovery
    spec: SwarmSpec
    holder: str
    namespace: str = "default"
    #: agent → sha256 hex of its credential (``None``: its Secret could not be read).
    masters: dict[str, str | None] = field(default_factory=dict)
    masters_read_at: float = 0.0
    pass_seconds: float | None = None
    passes: int = 0

    @property
    def id(self) -> SwarmId:
        return SwarmId(self.namespace, self.name)


class SwarmRegistry:
    """Thread-safe map of swarm (namespace/name) → :class:`SwarmEntry`."""

    def __init__(self, secrets: SecretReader = no_secrets, *, refresh_seconds: float = 60.0) -> None:
        self._secrets = secrets
        self._refresh = refresh_seconds
        self._lock = threading.Lock()
        self._entries: dict[SwarmId, SwarmEntry] = {}

    def _read_masters(self, spec: SwarmSpec, namespace: str) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        for master in spec.masters:
            try:
                token = self._secrets(namespace, master.credential_secret)
            except Exception as e:  # a Secret that cannot be read disables that master only
                log.warning(
                    "master %s: its credential Secret cannot be read (%s)", master.agent, type(e).__name__
                )
                token = None
            out[master.agent] = sha256_hex(token) if token else None
        return out

    def publish(
        self,
        name: str,
        recovery: Recovery,
        spec: SwarmSpec,
        *,
        holder: str,
        namespace: str = "default",
        pass_seconds: float | None = None,
    ) -> SwarmEntry:
        """Register or update a swarm (blocking: may read Secrets)."""
        now = time.monotonic()
        key = SwarmId(namespace, name)
        with self._lock:
            old = self._entries.get(key)
        fresh = (
            old is not None
            and old.spec == spec
            and old.namespace == namespace
            and now - old.masters_read_at < self._refresh
        )
        masters = old.masters if fresh and old is not None else self._read_masters(spec, namespace)
        read_at = old.masters_read_at if fresh and old is not None else now
        entry = SwarmEntry(
            name=name,
            recovery=recovery,
            spec=spec,
            holder=holder,
            namespace=namespace,
            masters=masters,
            masters_read_at=read_at,
            pass_seconds=pass_seconds if pass_seconds is not None else (old.pass_seconds if old else None),
            passes=(old.passes if old else 0) + (1 if pass_seconds is not None else 0),
        )
        with self._lock:
            self._entries[key] = entry
        return entry

    def withdraw(self, name: str, namespace: str = "default") -> None:
        with self._lock:
            self._entries.pop(SwarmId(namespace, name), None)

    def get(self, name: str, namespace: str | None = None) -> SwarmEntry | None:
        """The entry of ``name`` (in ``namespace`` when given); ``None`` when there is none.

        Without a namespace, a name held in several namespaces raises
        :class:`~agentihooks_operator.recovery.RecoveryRefused` naming them (a 409 at the API).
        """
        with self._lock:
            held = {k: e for k, e in self._entries.items() if k.name == name}
        if namespace is not None:  # compared, never parsed: an unusable namespace is just not served
            return next((e for k, e in held.items() if k.namespace == namespace), None)
        if not held:
            return None
        return held[resolve(name, held)]

    def entries(self) -> list[SwarmEntry]:
        with self._lock:
            return sorted(self._entries.values(), key=lambda e: (e.name, e.namespace))
