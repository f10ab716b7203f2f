"""The swarm registry: master credentials read from Secrets once per spec, kept as digests."""

from __future__ import annotations

from typing import Any

from agentihooks_operator.api.auth import sha256_hex
from agentihooks_operator.api.registry import SwarmRegistry
from testsupport.control_api import Secrets, swarm_with_masters


class _Recovery:  # the registry only stores it
    pass


def test_masters_are_read_once_per_spec_and_kept_as_digests() -> None:
    secrets = Secrets({"s1": "tok-1"})
    reg = SwarmRegistry(secrets)
    spec = swarm_with_masters({"m1": "s1", "m2": "missing"})
    rec: Any = _Recovery()
    entry = reg.publish("a", rec, spec, holder="h")
    assert entry.masters == {"m1": sha256_hex("tok-1"), "m2": None}
    assert "tok-1" not in repr(entry)
    reg.publish("a", rec, spec, holder="h", pass_seconds=0.5)
    assert secrets.reads == 2  # not read again for the same spec
    assert reg.get("a").pass_seconds == 0.5  # type: ignore[union-attr]
    reg.publish("a", rec, swarm_with_masters({"m1": "s1"}), holder="h")
    assert secrets.reads == 3
    reg.withdraw("a")
    assert reg.get("a") is None and reg.entries() == []


def test_a_secret_that_cannot_be_read_disables_only_that_master() -> None:
    def reader(namespace: str, name: str) -> str | None:
        if name == "broken":
            raise RuntimeError("api down")
        return "tok"

    reg = SwarmRegistry(reader, refresh_seconds=0)
    entry = reg.publish("a", _Recovery(), swarm_with_masters({"m1": "ok", "m2": "broken"}), holder="h")  # type: ignore[arg-type]
    assert entry.masters == {"m1": sha256_hex("tok"), "m2": None}
