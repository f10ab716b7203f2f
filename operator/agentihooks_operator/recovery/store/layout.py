"""Whether the keyspace still holds swarms under an earlier release's name-only keys.

This release names a swarm's keys by namespace and name
(``<root>:swarm:{<namespace>/<name>}:<part>``). An operator that started over
keys an earlier release wrote as ``<root>:swarm:{<name>}:<part>`` would not
see the attempts they record: it would admit every seat again while the old
attempts' Pods still run, the one thing this product must never do. So the
operator refuses to start until ``agentihooks admin migrate-keys`` has moved
them, and names the command for each swarm it found.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import redis

#: A name-only hash tag: braces around a swarm name holding no ``/``.
_NAME_ONLY = re.compile(r"^\{([^{}/]+)\}:")


def _text(v: bytes | str) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else v


def name_only_swarms(keys: Iterable[bytes | str], prefix: str) -> list[str]:
    """The swarm names that ``keys`` hold under the name-only layout of ``prefix``."""
    head = f"{prefix}:swarm:"
    found: set[str] = set()
    for raw in keys:
        key = _text(raw)
        if key.startswith(head) and (m := _NAME_ONLY.match(key[len(head) :])):
            found.add(m.group(1))
    return sorted(found)


def glob_literal(text: str) -> str:
    """``text`` as a literal in a SCAN pattern (its glob characters escaped)."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


def unmigrated(client: redis.Redis, prefix: str) -> list[str]:
    """Swarms with keys under the name-only layout (a SCAN of ``<root>:swarm:{*``; blocking)."""
    pattern = glob_literal(f"{prefix}:swarm:{{") + "*"
    return name_only_swarms(client.scan_iter(match=pattern, count=1000), prefix)


def refusal(names: list[str], prefix: str) -> str:
    """The operator's refusal to start, naming the command for every swarm found."""
    shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
    return (
        f"refusing to start: Redis holds swarms under the name-only keys of an earlier release "
        f"({prefix}:swarm:{{<name>}}:...): {shown}. A swarm is now named by namespace and name; with "
        f"every operator stopped, run `agentihooks admin migrate-keys <name> -n <namespace>` (then "
        f"again with --apply) for each, and start the operator again (docs/operations.md, "
        f'"Upgrading to namespaced keys")'
    )
