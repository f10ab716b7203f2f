"""A Swarm's identity: the namespace it lives in and its name there.

Two teams may each name a Swarm ``eng`` in their own namespaces; the name alone
does not tell them apart (issue 22). Everything that must keep two Swarms apart
(Redis keys, registry entries, labels, execution ids) derives its form from
:class:`SwarmId` here, so the rules for joining and splitting the two parts
live in one place.

The joined form is ``<namespace>/<name>``. A Kubernetes namespace is a DNS
label (no ``/`` and no ``.``), so the first ``/`` always splits it back
unambiguously. :func:`resolve` answers a request that names only the Swarm:
it is accepted only when one namespace holds that name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from .errors import InvalidInput, RecoveryRefused

#: A namespace is an RFC 1123 DNS label (what the API server accepts).
_NAMESPACE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
#: The Swarm names the key layout has always accepted (kept, so no existing Swarm becomes unnamable).
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")
#: A label value is at most 63 characters; longer joined forms are cut and given a digest suffix.
_LABEL_MAX = 63
#: Short refusal code of a name-only request that more than one namespace answers.
AMBIGUOUS = "ambiguous_swarm"


@dataclass(frozen=True, order=True)
class SwarmId:
    """One Swarm: ``namespace`` and ``name``, both checked when built."""

    namespace: str
    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.namespace, str) or not _NAMESPACE.fullmatch(self.namespace):
            raise InvalidInput(f"not a usable namespace: {self.namespace!r}")
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise InvalidInput(f"not a usable swarm name: {self.name!r}")

    @classmethod
    def parse(cls, text: str) -> SwarmId:
        """Read the joined form ``<namespace>/<name>``; anything else is refused, naming what was wrong."""
        namespace, sep, name = text.partition("/")
        if not sep:
            raise InvalidInput(f"a swarm is named <namespace>/<name>; got {text!r} (no namespace)")
        return cls(namespace, name)

    @property
    def joined(self) -> str:
        """``<namespace>/<name>``: registry keys, metrics labels, Event and ledger text."""
        return f"{self.namespace}/{self.name}"

    @property
    def hash_tag(self) -> str:
        """The Redis Cluster hash tag carrying both parts, so a Swarm's keys share one slot."""
        return "{" + self.joined + "}"

    @property
    def url_path(self) -> str:
        """The control-API path of this Swarm, under which every per-swarm route lives."""
        return f"/v1/namespaces/{self.namespace}/swarms/{self.name}"

    def __str__(self) -> str:
        return self.joined


def resolve(name: str, known: Iterable[SwarmId], *, namespace: str | None = None) -> SwarmId:
    """The one Swarm a request means.

    With ``namespace`` given, it is that Swarm (or :class:`InvalidInput` when unknown). Without
    it, the name must be held by exactly one namespace; when several hold it the request is
    refused naming every one of them, so the caller can repeat it with the right namespace.
    Nothing is changed either way: this only reads ``known``.
    """
    if namespace is not None:
        wanted = SwarmId(namespace, name)
        if wanted not in set(known):
            raise InvalidInput(f"no swarm {wanted.joined}")
        return wanted
    SwarmId("default", name)  # checks the name alone, with the same message as everywhere else
    holders = sorted(s for s in known if s.name == name)
    if not holders:
        raise InvalidInput(f"no swarm named {name!r} in any namespace")
    if len(holders) > 1:
        spaces = ", ".join(s.namespace for s in holders)
        raise RecoveryRefused(
            f"swarm {name!r} exists in namespaces {spaces}; name the namespace "
            f"(/v1/namespaces/<namespace>/swarms/{name}/... or -n <namespace>)",
            reason=AMBIGUOUS,
        )
    return holders[0]
