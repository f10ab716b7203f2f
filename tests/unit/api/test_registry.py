"""The swarm registry: master credentials read from Secrets once per spec, kept as digests."""

from __future__ import annotations

from typing import Any

from agentihooks_operator.api.access.auth import sha256_hex
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


def test_same_named_swarms_of_two_namespaces_are_two_entries() -> None:
    from agentihooks_operator.recovery import RecoveryRefused

    reg = SwarmRegistry(Secrets({}))
    spec = swarm_with_masters({})
    a, b = _Recovery(), _Recovery()
    reg.publish("eng", a, spec, holder="h", namespace="team-a")  # type: ignore[arg-type]
    assert reg.get("eng") is not None and reg.get("eng").recovery is a  # type: ignore[union-attr]
    reg.publish("eng", b, spec, holder="h", namespace="team-b")  # type: ignore[arg-type]
    assert [(e.namespace, e.recovery) for e in reg.entries()] == [("team-a", a), ("team-b", b)]
    assert reg.get("eng", "team-b").recovery is b  # type: ignore[union-attr]
    assert reg.get("eng", "team-c") is None
    try:
        reg.get("eng")
    except RecoveryRefused as e:
        assert e.reason == "ambiguous_swarm" and "team-a, team-b" in e.message
    else:
        raise AssertionError("a name held in two namespaces was answered")
    assert len(reg.entries()) == 2  # the refused lookup changed nothing
    reg.withdraw("eng", "team-a")
    assert reg.get("eng").recovery is b  # type: ignore[union-attr]
